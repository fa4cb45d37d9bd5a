import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import type { ShopifyEmulator } from '../../src/emulator/index.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { call, eventsOf, rowOf, send } from './support.js';

const TIMEOUT_MS = 500;
const TOOLS = ['order_lookup.lookup', 'amazon_query.get_order', 'shopify_order.add_note', 'shopify_refund.create'];
const RULES = [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }];

/** Timeouts, and writes whose answer never came (VENDOR_TIMEOUT_MS is small here). */
describe('timeouts and lost answers', () => {
  let h: Harness;
  let shop: ShopifyEmulator;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: String(TIMEOUT_MS), VENDOR_CONNECT_TIMEOUT_MS: '200' });
    shop = h.emu.vendor<ShopifyEmulator>('shopify');
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });

  const fresh = () => setupOrg(h.t, { tools: TOOLS, vendors: ['shopify', 'amazon'], rules: RULES });
  const refundRequests = () => h.emu.requests.filter((r) => r.body.includes('refundCreate')).length;
  const timed = async <T>(p: Promise<T>): Promise<[T, number]> => {
    const t0 = Date.now();
    const out = await p;
    return [out, Date.now() - t0];
  };

  it('a read the vendor does not answer in time → failed / VENDOR_TIMEOUT within the budget', async () => {
    const org = await fresh();
    // A vendor hung far longer than the bound below: a call that outlived its budget is told apart from a slow
    // machine by seconds, not by a few hundred milliseconds (the emulator's timers end when it stops).
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 10_000, times: Infinity });
    const [res, ms] = await timed(call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT', toolResult: { is_error: true } });
    expect(ms).toBeLessThan(TIMEOUT_MS + 3_000);
    expect(await rowOf(h, res.body.toolCallId)).toMatchObject({ status: 'failed', error_code: 'VENDOR_TIMEOUT' });

    h.emu.fault({ vendor: 'amazon', path: /^\/orders\//, kind: 'delay', delayMs: 3_000 });
    const [amz] = await timed(call(h, org, 'amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped }));
    expect(amz.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT' });
  });

  it('a write applied but answered too late → indeterminate / OUTCOME_UNKNOWN, not resent', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'delay_after', delayMs: 2_000, bodyMatch: /orderUpdate/ });
    const before = h.emu.requests.filter((r) => r.body.includes('orderUpdate')).length;
    const res = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '1001', note: 'slow vendor' });
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    expect(h.emu.requests.filter((r) => r.body.includes('orderUpdate')).length - before).toBe(1);
    expect(shop.order(1001)?.note).toBe('slow vendor');
  });

  for (const kind of ['reset_after', 'delay_after'] as const) {
    it(`refund whose answer is lost (${kind}) → indeterminate; re-posting the same tool_use never refunds twice`, async () => {
      const org = await fresh();
      const orderId = kind === 'reset_after' ? '12345' : '450789469';
      const refunds = shop.refundCount(orderId);
      h.emu.fault({ vendor: 'shopify', kind, delayMs: 2_000, bodyMatch: /refundCreate/, times: Infinity });
      const use = toolUse('shopify_refund', { action: 'create', orderId, amount: '7.50', note: 'late parcel' });
      const sentBefore = refundRequests();

      const res = await send(h, org, use);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', replayed: false, result: null });
      expect(shop.refundCount(orderId) - refunds).toBe(1);
      expect(refundRequests() - sentBefore).toBe(1);
      const row = await rowOf(h, res.body.toolCallId);
      expect(row).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN', retry_count: 0, cost_cents: 5 });
      expect((await eventsOf(h, res.body.toolCallId)).at(-1)).toMatchObject({ type: 'tool_call.indeterminate', metadata: { errorCode: 'OUTCOME_UNKNOWN' } });

      h.emu.clearFaults();
      for (let i = 0; i < 3; i++) {
        const again = await send(h, org, use);
        expect(again.status).toBe(200);
        expect(again.headers['idempotent-replayed']).toBe('true');
        expect(again.body).toMatchObject({ toolCallId: res.body.toolCallId, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', replayed: true });
      }
      const concurrent = await Promise.all(Array.from({ length: 5 }, () => send(h, org, use)));
      expect(concurrent.map((r) => r.body.status)).toEqual(Array(5).fill('indeterminate'));
      expect(refundRequests() - sentBefore).toBe(1);
      expect(shop.refundCount(orderId) - refunds).toBe(1);
    });
  }
});

/**
 * A Retry-After longer than what is left of the call's budget is handed back, not slept on. The budget here is
 * seconds long and the wait asked for longer still, so sleeping on it (even only up to the deadline) costs
 * seconds over the machine's own time for the same call: told apart from load by a bound with seconds either side.
 */
describe('a Retry-After that outlasts the call budget', () => {
  const BUDGET_MS = 5_000;
  const RETRY_AFTER_S = 8; // past the budget, within the cap below: only the budget rules the wait out
  const SLACK_MS = 2_500; // half the shortest sleep ruled out (up to the deadline: BUDGET_MS)
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: String(BUDGET_MS), VENDOR_RETRY_AFTER_CAP_MS: '10000' });
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });
  const timed = async <T>(p: Promise<T>): Promise<[T, number]> => {
    const t0 = Date.now();
    const out = await p;
    return [out, Date.now() - t0];
  };
  const shopifyRequests = () => h.emu.requests.filter((r) => r.vendor === 'shopify').length;

  it('is not slept on; a refused write stays failed, not unknown', async () => {
    const org = await setupOrg(h.t, { tools: TOOLS, vendors: ['shopify'], rules: RULES });
    // The same calls without the fault, timed first: "not slept on" is measured against what this machine takes now.
    const [plainWrite, writeBaselineMs] = await timed(call(h, org, 'shopify_order', { action: 'add_note', orderId: '1001', note: 'answered at once' }));
    expect(plainWrite.body).toMatchObject({ status: 'succeeded' });
    const [plainRead, readBaselineMs] = await timed(call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(plainRead.body).toMatchObject({ status: 'succeeded' });

    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'retry-after': String(RETRY_AFTER_S) }, bodyMatch: /orderUpdate/, times: Infinity });
    let before = shopifyRequests();
    const [res, ms] = await timed(call(h, org, 'shopify_order', { action: 'add_note', orderId: '1001', note: 'rate limited' }));
    // The vendor refused the write: nothing happened, so the outcome is known.
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED', retryAfterSeconds: RETRY_AFTER_S });
    expect(shopifyRequests() - before).toBe(1);
    expect(ms).toBeLessThan(writeBaselineMs + SLACK_MS);

    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'retry-after': String(RETRY_AFTER_S) }, times: Infinity });
    before = shopifyRequests();
    const [read, readMs] = await timed(call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(read.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED', retryAfterSeconds: RETRY_AFTER_S });
    expect(shopifyRequests() - before).toBe(1);
    expect(readMs).toBeLessThan(readBaselineMs + SLACK_MS);
  }, 60_000);
});
