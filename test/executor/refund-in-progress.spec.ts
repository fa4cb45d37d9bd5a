import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ShopifyEmulator } from '../../src/emulator/index.js';
import { refundMutation } from '../../src/vendors/shopify/shopify.graphql.js';
import { refundIdempotencyKey } from '../../src/vendors/shopify/shopify.refund.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { call, eventsOf, refundKeysSince, rowOf, send } from './support.js';

const BUDGET_MS = 5_000;
const RULES = [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }];

/**
 * refundCreate answers that say an earlier attempt under the same @idempotent
 * key reached Shopify (VENDORS.md §1.9 point 6): "currently in progress" and
 * "same idempotency key ... different parameters". Whatever comes after, the
 * refund may exist: the call ends succeeded (Shopify handed back the original)
 * or indeterminate / OUTCOME_UNKNOWN for ops to reconcile — never failed, which
 * would invite the model to retry under a new tool_use id, i.e. a new key.
 */
describe('refundCreate "in progress" and key reuse, through the pipeline', () => {
  let h: Harness;
  let shop: ShopifyEmulator;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: String(BUDGET_MS) });
    shop = h.emu.vendor<ShopifyEmulator>('shopify');
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });

  const fresh = () => setupOrg(h.t, { tools: ['shopify_refund.create'], vendors: ['shopify'], rules: RULES });
  const retryReasons = async (id: string) => (await eventsOf(h, id)).filter((e) => e.type === 'tool_call.retried').map((e) => e.metadata.reason);

  it('Shopify still processing past the call budget (504, then "in progress") → indeterminate / OUTCOME_UNKNOWN; one refund lands; ops reconcile it', async () => {
    const org = await fresh();
    const refunds = shop.refundCount(12345);
    // The edge gives up at once; Shopify lands the refund after the call's budget.
    h.emu.fault({ vendor: 'shopify', kind: 'status_then_apply', status: 504, delayMs: BUDGET_MS + 2_000, bodyMatch: /refundCreate/ });
    const before = h.emu.requests.length;
    const use = toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '2.00' });
    const res = await send(h, org, use);

    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', result: null, toolResult: { is_error: true } });
    expect(res.body.toolResult.content).toMatch(/Do not send it again/);
    expect(res.body.retryAfterSeconds).toBeUndefined();
    const keys = refundKeysSince(h, before);
    expect(keys.length).toBeGreaterThanOrEqual(3);
    expect(new Set(keys).size).toBe(1);
    expect(await rowOf(h, res.body.toolCallId)).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN' });
    expect(await retryReasons(res.body.toolCallId)).toContain('in_progress');
    expect((await eventsOf(h, res.body.toolCallId)).at(-1)).toMatchObject({ type: 'tool_call.indeterminate', metadata: { errorCode: 'OUTCOME_UNKNOWN' } });

    await waitFor(() => shop.refundCount(12345) - refunds === 1, 'the first attempt to land', BUDGET_MS + 5_000);
    const sent = h.emu.requests.length;
    const again = await send(h, org, use);
    expect(again.body).toMatchObject({ toolCallId: res.body.toolCallId, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', replayed: true });
    expect(h.emu.requests.length).toBe(sent);
    expect(shop.refundCount(12345) - refunds).toBe(1);

    const ops = await createKey(h.t, org.orgId, 'ops');
    const settled = await h.t.http
      .post(`/v1/tool-calls/${res.body.toolCallId}/reconcile`)
      .set(bearer(ops.key))
      .send({ status: 'succeeded', note: 'refund found on the order' });
    expect(settled.status).toBe(200);
    expect(settled.body).toMatchObject({ id: res.body.toolCallId, status: 'succeeded' });
  });

  it('"in progress" is polled with the same key within the budget: a refund that lands in time is picked up → succeeded, one refund', async () => {
    const org = await fresh();
    const refunds = shop.refundCount(450789469);
    // Lands after the first attempt + VENDOR_MAX_RETRIES resends would have given up, well inside the budget.
    h.emu.fault({ vendor: 'shopify', kind: 'status_then_apply', status: 503, delayMs: 3_000, bodyMatch: /refundCreate/ });
    const before = h.emu.requests.length;
    const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '450789469', amount: '3.00' });

    expect(res.body).toMatchObject({ status: 'succeeded', errorCode: null, result: { orderId: '450789469', amount: '3.00', status: 'success' } });
    expect(shop.refundCount(450789469) - refunds).toBe(1);
    const keys = refundKeysSince(h, before);
    expect(keys.length).toBeGreaterThanOrEqual(5);
    expect(new Set(keys).size).toBe(1);
    expect(await retryReasons(res.body.toolCallId)).toContain('in_progress');
  });

  it('a 503 after "in progress" does not make it failed: the earlier attempt may still land → indeterminate', async () => {
    const org = await fresh();
    const refunds = shop.refundCount(1001);
    h.emu.fault({ vendor: 'shopify', kind: 'status_then_apply', status: 502, delayMs: 4_000, bodyMatch: /refundCreate/ });
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 0, bodyMatch: /refundCreate/ }); // reaches Shopify: "in progress"
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 503, bodyMatch: /refundCreate/, times: Infinity });
    const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '1001', amount: '4.00' });

    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    const row = await rowOf(h, res.body.toolCallId);
    expect(row).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN', vendor_status: 503 });
    expect(row.error_text).toMatch(/in progress/);
    expect(await retryReasons(res.body.toolCallId)).toEqual(['server_error', 'in_progress', 'server_error', 'server_error']);
    await waitFor(() => shop.refundCount(1001) - refunds === 1, 'the first attempt to land', 6_000);
  });

  it('the key already used with other parameters (an earlier attempt reached Shopify) → indeterminate / OUTCOME_UNKNOWN, sent once, never re-keyed', async () => {
    const org = await fresh();
    const header = `refund-${Date.now()}`;
    const key = refundIdempotencyKey(org.orgId, `key:${header}`);
    // An earlier attempt of this logical refund, with another amount, already reached Shopify.
    const earlier = await fetch(`${h.emu.url}/admin/api/2026-07/graphql.json`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-shopify-access-token': shop.accessToken },
      body: JSON.stringify({
        query: refundMutation(key),
        variables: {
          input: {
            orderId: 'gid://shopify/Order/1002',
            transactions: [{ orderId: 'gid://shopify/Order/1002', parentId: 'gid://shopify/OrderTransaction/71030', amount: '1.00', gateway: 'shopify_payments', kind: 'REFUND' }],
          },
        },
      }),
    });
    expect(((await earlier.json()) as { data: { refundCreate: { userErrors: unknown[] } } }).data.refundCreate.userErrors).toEqual([]);
    const refunds = shop.refundCount(1002);
    const before = h.emu.requests.length;

    const res = await send(h, org, toolUse('shopify_refund', { action: 'create', orderId: '1002', amount: '5.00' }), { 'Idempotency-Key': header });
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', toolResult: { is_error: true } });
    expect(refundKeysSince(h, before)).toEqual([key]);
    expect(shop.refundCount(1002)).toBe(refunds);
    expect(await rowOf(h, res.body.toolCallId)).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN', retry_count: 0 });
  });
});
