import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NangoEmulator, ShopifyEmulator } from '../../src/emulator/index.js';
import { CREDENTIALS, setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { call, rowOf } from './support.js';

const MAX_BYTES = 4 * 1024;
const TOOLS = ['nango_proxy.get', 'nango_proxy.post', 'shopify_refund.create', 'order_lookup.lookup'];
const RULES = [
  { id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' },
  { id: 'allow-nango-post', match: { toolName: 'nango_proxy.post' }, decision: 'allow' },
];
const SHOP = CREDENTIALS.shopify.shopDomain as string;
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
    const rows = (await h.t.ds.query('SELECT status, error_code, retry_after_seconds FROM tool_calls WHERE org_id = $1', [org.orgId])) as Record<string, unknown>[];
    expect(rows, JSON.stringify(res.body)).toEqual([expect.objectContaining({ status: 'failed', error_code: 'VENDOR_RATE_LIMITED' })]);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' });
  });

  it('Shopify 429 with a far-future HTTP-date Retry-After: same', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'retry-after': 'Fri, 31 Dec 9999 23:59:59 GMT' }, times: Infinity });
    const res = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
    const rows = (await h.t.ds.query('SELECT status, error_code FROM tool_calls WHERE org_id = $1', [org.orgId])) as Record<string, unknown>[];
    expect(rows, JSON.stringify(res.body)).toEqual([expect.objectContaining({ status: 'failed', error_code: 'VENDOR_RATE_LIMITED' })]);
    expect(res.status).toBe(200);
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
  });

  it('a refund that waited out its lease bound is not retried into a mutation sent with no budget left (ends indeterminate)', async () => {
    const org = await fresh();
    // Another holder's lease runs out 1.5 s into this call (budget 2 s, wait bound 1 s).
    await h.t.ds.query(
      `INSERT INTO shopify_refund_leases (org_id, shop_domain, order_id, holder, lease_until) VALUES ($1, $2, '12345', $3, now() + interval '1500 milliseconds')`,
      [org.orgId, SHOP, randomUUID()],
    );
    // Shopify takes 800 ms to run a refund.
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 800, bodyMatch: REFUND, times: Infinity });
    const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' });
    // Either the refund ran inside the budget or nothing was sent; an own-goal "unknown" needs an ops reconcile.
    const row = await rowOf(h, res.body.toolCallId);
    const seen = JSON.stringify({ status: row.status, retry_count: row.retry_count, error_text: row.error_text });
    expect(['succeeded', 'failed'], seen).toContain(row.status);
    // Failed: it waited out the bound and was not retried (nothing sent, said so).
    if (row.status === 'failed') expect([row.retry_count, row.error_code], seen).toEqual([0, 'VENDOR_TIMEOUT']);
  });
});
