import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NangoEmulator, ShopifyEmulator } from '../../src/emulator/index.js';
import { Clock } from '../../src/common/clock.js';
import { setupOrg, shopDomainOf, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { call, rowOf, send } from './support.js';

const MAX_BYTES = 4 * 1024;
const TOOLS = ['nango_proxy.get', 'nango_proxy.post', 'shopify_refund.create', 'order_lookup.lookup'];
const RULES = [
  { id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' },
  { id: 'allow-nango-post', match: { toolName: 'nango_proxy.post' }, decision: 'allow' },
];
const REFUND = /refundCreate/;

describe('vendor answers at the edges: huge Retry-After, oversized error bodies, a refund lease waited out', () => {
  let h: Harness;
  let shop: ShopifyEmulator;
  let nango: NangoEmulator;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_MAX_RESPONSE_BYTES: String(MAX_BYTES) });
    shop = h.emu.vendor<ShopifyEmulator>('shopify');
    nango = h.emu.vendor<NangoEmulator>('nango');
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });
  const fresh = () => setupOrg(h.t, { tools: TOOLS, vendors: ['shopify', 'nango'], rules: RULES });

  it('a 429 whose Retry-After is absurdly large (vendor/Nango upstream) is answered VENDOR_RATE_LIMITED, not a 500 with the call left running', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'status', status: 429, headers: { 'retry-after': '99999999999' }, body: { message: 'slow down' }, times: Infinity });
    const res = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/notes' });
    const rows = (await h.t.ds.query('SELECT status, error_code, retry_after_seconds, retry_count FROM tool_calls WHERE org_id = $1', [org.orgId])) as Record<string, unknown>[];
    // Clamped to a day (the integer column, and what the agent is told); far beyond the cap, so never slept on.
    expect(rows, JSON.stringify(res.body)).toEqual([{ status: 'failed', error_code: 'VENDOR_RATE_LIMITED', retry_after_seconds: 86_400, retry_count: 0 }]);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED', retryAfterSeconds: 86_400 });
  });

  it('Shopify 429 with a far-future HTTP-date Retry-After: same', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'retry-after': 'Fri, 31 Dec 9999 23:59:59 GMT' }, times: Infinity });
    const res = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
    const rows = (await h.t.ds.query('SELECT status, error_code, retry_after_seconds, retry_count FROM tool_calls WHERE org_id = $1', [org.orgId])) as Record<string, unknown>[];
    expect(rows, JSON.stringify(res.body)).toEqual([{ status: 'failed', error_code: 'VENDOR_RATE_LIMITED', retry_after_seconds: 86_400, retry_count: 0 }]);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ retryAfterSeconds: 86_400 });
  });

  it("a stored vendor wait counts down on replays and GET …/result, and is left out once passed: a client that waits it and re-posts the same tool_use is not told to wait as long again, for ever", async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'retry-after': '3600' }, times: Infinity });
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const first = await send(h, org, use);
    expect(first.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED', retryAfterSeconds: 3600, replayed: false });
    h.emu.clearFaults(); // the vendor is fine again: only a new tool call would find out
    const atVendor = h.emu.count({ vendor: 'shopify' });
    const wait = (b: { retryAfterSeconds?: number }) => b.retryAfterSeconds;
    const replay = await send(h, org, use);
    expect(replay.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED', replayed: true });
    expect(wait(replay.body)).toBeGreaterThan(3590); // a resend after a lost answer still gets (nearly) the whole wait
    const clock = h.t.app.get(Clock);
    clock.advance(1_800_000);
    try {
      const half = await send(h, org, use);
      expect(wait(half.body)).toBeGreaterThan(1_790);
      expect(wait(half.body)).toBeLessThanOrEqual(1_800);
      expect(half.body.toolResult.content).toContain(`Try again in ${wait(half.body)} seconds`);
      clock.advance(1_801_000);
      const after = await send(h, org, use);
      const result = await h.t.http.get(`/v1/tool-calls/${first.body.toolCallId}/result`).set(bearer(org.agentKey));
      for (const b of [after.body, result.body]) {
        expect(b, JSON.stringify(b)).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' });
        expect(b).not.toHaveProperty('retryAfterSeconds');
        expect(b.toolResult.content).toBe('The vendor is limiting requests. Try again later.');
      }
      expect(after.body.replayed).toBe(true);
      expect(after.headers['retry-after']).toBeUndefined();
      // The ledger keeps what the vendor said.
      expect(await rowOf(h, first.body.toolCallId)).toMatchObject({ retry_after_seconds: 3600 });
      expect(h.emu.count({ vendor: 'shopify' }) - atVendor).toBe(0); // replays: nothing sent again
    } finally {
      clock.advance(-3_601_000);
    }
  });

  it('nango_proxy.post answered 502 with a body over VENDOR_MAX_RESPONSE_BYTES (upstream then applies it) is indeterminate, not failed', async () => {
    const org = await fresh();
    const posts = nango.appliedPosts;
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'status_then_apply', status: 502, body: `<html>${'x'.repeat(MAX_BYTES * 2)}</html>`, delayMs: 50 });
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { text: 'hello' } });
    await new Promise((r) => setTimeout(r, 200));
    expect(nango.appliedPosts - posts).toBe(1); // the upstream did act
    // A 5xx to a non-idempotent write leaves its outcome unknown (failure-mapping.ts isUnknownWriteOutcome, ARCHITECTURE "States").
    expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
  });

  it('shopify refundCreate answered 503 with a big body while Shopify goes on and refunds: indeterminate and the order stays leased', async () => {
    const org = await fresh();
    const before = shop.refundCount(12345);
    h.emu.fault({ vendor: 'shopify', kind: 'status_then_apply', status: 503, bodyMatch: REFUND, body: `<html>${'x'.repeat(MAX_BYTES * 2)}</html>`, delayMs: 50, times: Infinity });
    const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' });
    await new Promise((r) => setTimeout(r, 300));
    expect(shop.refundCount(12345) - before).toBeGreaterThanOrEqual(1); // money went back
    expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
  });

  it('a read answered 503 with a big (HTML) error page once is retried like any 5xx (VENDORS.md §5), and succeeds', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 503, body: `<html>${'x'.repeat(MAX_BYTES * 2)}</html>`, times: 1 });
    const res = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
    expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'succeeded' });
    expect((await rowOf(h, res.body.toolCallId)).retry_count).toBe(1);
  });

  it('a refund that waited out its lease bound is failed / VENDOR_TIMEOUT with nothing sent, and not retried into a mutation with no budget left', async () => {
    const org = await fresh();
    // Another holder's lease runs out 1.5 s into this call (budget 2 s, wait bound 1 s).
    await h.t.ds.query(
      `INSERT INTO shopify_refund_leases (org_id, shop_domain, order_id, holder, lease_until) VALUES ($1, $2, '12345', $3, now() + interval '1500 milliseconds')`,
      [org.orgId, shopDomainOf(org.orgId), randomUUID()],
    );
    // Shopify takes 800 ms to run a refund.
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 800, bodyMatch: REFUND, times: Infinity });
    const from = h.emu.requests.length;
    const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' });
    // Not an own-goal "unknown" needing an ops reconcile: it waited out the bound, was not retried, and said so.
    const row = await rowOf(h, res.body.toolCallId);
    expect([row.status, row.error_code, row.retry_count], row.error_text as string).toEqual(['failed', 'VENDOR_TIMEOUT', 0]);
    expect(row.error_text).toMatch(/another refund of this order was still in flight.*not sent/);
    expect(h.emu.requests.slice(from).filter((r) => REFUND.test(r.body))).toHaveLength(0);
  });

  it('a refund whose order read was slow waits only as long as leaves its own request half the budget (never an own-goal indeterminate)', async () => {
    const org = await fresh();
    // Another holder's lease runs out 1.5 s into this call (budget 2 s); the order read before the lease takes 0.7 s.
    await h.t.ds.query(
      `INSERT INTO shopify_refund_leases (org_id, shop_domain, order_id, holder, lease_until) VALUES ($1, $2, '12345', $3, now() + interval '1500 milliseconds')`,
      [org.orgId, shopDomainOf(org.orgId), randomUUID()],
    );
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 700, bodyMatch: /^(?![\s\S]*refundCreate)/, times: 1 });
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 800, bodyMatch: REFUND, times: Infinity });
    const from = h.emu.requests.length;
    const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' });
    const row = await rowOf(h, res.body.toolCallId);
    expect([row.status, row.error_code, row.retry_count], row.error_text as string).toEqual(['failed', 'VENDOR_TIMEOUT', 0]);
    expect(h.emu.requests.slice(from).filter((r) => REFUND.test(r.body))).toHaveLength(0);
  });
});
