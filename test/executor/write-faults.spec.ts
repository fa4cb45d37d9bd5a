import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NangoEmulator, ShopifyEmulator } from '../../src/emulator/index.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { call, eventsOf, refundKeysSince, rowOf, send } from './support.js';
import { waitFor } from '../support/wait.js';

const WRITES = ['shopify_order.add_note', 'shopify_refund.create', 'nango_proxy.post'];
const RULES = [
  { id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' },
  { id: 'allow-nango-post', match: { toolName: 'nango_proxy.post' }, decision: 'allow' },
];

/**
 * Vendor faults on writes. An idempotent write (the note's final text, the
 * refund's @idempotent key) is resent on an answer that says try again
 * (429/THROTTLED, 5xx) or when the request never left; once it may have
 * arrived and no answer came, the outcome is unknown and it is never resent.
 * A write that is not idempotent (Nango POST) is never resent.
 */
describe('vendor faults on writes, through the pipeline', () => {
  let h: Harness;
  let shop: ShopifyEmulator;
  let nango: NangoEmulator;
  beforeAll(async () => {
    h = await startHarness();
    shop = h.emu.vendor<ShopifyEmulator>('shopify');
    nango = h.emu.vendor<NangoEmulator>('nango');
  });
  afterEach(() => h.emu.clearFaults());
  afterAll(async () => {
    await h?.close();
  });

  const fresh = () => setupOrg(h.t, { tools: WRITES, vendors: ['shopify', 'nango'], rules: RULES });
  /** Requests whose body matches `re`, optionally only those the emulator applied. */
  const sent = (re: RegExp, applied?: boolean) => h.emu.requests.filter((r) => re.test(r.body) && (applied === undefined || r.applied === applied)).length;
  const note = (org: OrgSetup, orderId: string, text: string) => call(h, org, 'shopify_order', { action: 'add_note', orderId, note: text });

  it('reset after add_note was applied → 200 indeterminate / OUTCOME_UNKNOWN, sent once, never retried or replayed', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'reset_after', bodyMatch: /orderUpdate/, times: Infinity });
    const before = sent(/orderUpdate/);
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '1002', note: 'Reset after apply' });
    const res = await send(h, org, use);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', result: null, toolResult: { is_error: true } });
    expect(res.body.toolResult.content).toMatch(/Do not send it again/);
    expect(sent(/orderUpdate/) - before).toBe(1);
    expect(shop.order(1002)?.note).toBe('Reset after apply');
    expect(await rowOf(h, res.body.toolCallId)).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN', retry_count: 0 });
    expect((await eventsOf(h, res.body.toolCallId)).map((e) => e.type)).toEqual(['tool_call.requested', 'tool_call.started', 'tool_call.indeterminate']);

    const again = await send(h, org, use);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ toolCallId: res.body.toolCallId, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', replayed: true });
    expect(sent(/orderUpdate/) - before).toBe(1);
  });

  it('a reset on a write the vendor did not apply is still unknown to the gateway: indeterminate, not resent', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'reset_before', bodyMatch: /orderUpdate/ });
    const before = sent(/orderUpdate/);
    const applied = sent(/orderUpdate/, true);
    const res = await note(org, '1001', 'never applied');
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    expect(sent(/orderUpdate/) - before).toBe(1);
    expect(sent(/orderUpdate/, true)).toBe(applied);
    expect(shop.order(1001)?.note).not.toBe('never applied');
  });

  it('500 on add_note → resent with the same final text (VENDORS.md §5), and succeeds once the vendor recovers', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, bodyMatch: /orderUpdate/, times: 1 });
    const before = sent(/orderUpdate/);
    const res = await note(org, '1001', 'after a 500');
    expect(res.body).toMatchObject({ status: 'succeeded', result: { orderId: '1001', note: 'after a 500' } });
    const texts = h.emu.requests.filter((r) => /orderUpdate/.test(r.body)).slice(-2).map((r) => (JSON.parse(r.body) as { variables: { input: { note: string } } }).variables.input.note);
    expect(sent(/orderUpdate/) - before).toBe(2);
    expect(texts).toEqual(['after a 500', 'after a 500']);
    expect((await rowOf(h, res.body.toolCallId)).retry_count).toBe(1);
    expect(shop.order(1001)?.note).toBe('after a 500');
  });

  it('500 on add_note every time → failed / VENDOR_ERROR after VENDOR_MAX_RETRIES resends', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, bodyMatch: /orderUpdate/, times: Infinity });
    const before = sent(/orderUpdate/);
    const res = await note(org, '1001', 'five hundred');
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
    expect(sent(/orderUpdate/) - before).toBe(4); // the first send + 3 retries (the default)
    expect((await rowOf(h, res.body.toolCallId)).retry_count).toBe(3);
  });

  it('429 on a write (the vendor refused it) → resent with the same final text, succeeds', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'retry-after': '0.1' }, bodyMatch: /orderUpdate/ });
    const before = sent(/orderUpdate/);
    const res = await note(org, '1001', 'after a 429');
    expect(res.body).toMatchObject({ status: 'succeeded', result: { orderId: '1001', note: 'after a 429' } });
    expect(sent(/orderUpdate/) - before).toBe(2);
    expect(sent(/orderUpdate/, true)).toBeGreaterThanOrEqual(1);
    expect((await rowOf(h, res.body.toolCallId)).retry_count).toBe(1);
  });

  it('refund: a reset on the preceding read is retried (the mutation never left) → exactly one refund', async () => {
    const org = await fresh();
    const refunds = shop.refundCount(450789469);
    h.emu.fault({ vendor: 'shopify', kind: 'reset_before', bodyMatch: /RefundContext/ });
    const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '450789469', amount: '5.00' });
    expect(res.body).toMatchObject({ status: 'succeeded', result: { amount: '5.00', status: 'success' } });
    expect(shop.refundCount(450789469) - refunds).toBe(1);
    expect((await rowOf(h, res.body.toolCallId)).retry_count).toBe(1);
  });

  it('refund: THROTTLED on the mutation → resent with the same @idempotent key → exactly one refund', async () => {
    const org = await fresh();
    const refunds = shop.refundCount(450789469);
    h.emu.fault({ vendor: 'shopify', kind: 'throttled', bodyMatch: /refundCreate/ });
    const before = h.emu.requests.length;
    const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '450789469', amount: '1.25' });
    expect(res.body).toMatchObject({ status: 'succeeded', result: { amount: '1.25' } });
    expect(shop.refundCount(450789469) - refunds).toBe(1);
    const keys = refundKeysSince(h, before);
    expect(keys).toHaveLength(2);
    expect(new Set(keys).size).toBe(1);
  });

  it('refund: 500 on the mutation every time → resent with the same @idempotent key, then indeterminate / OUTCOME_UNKNOWN (a 5xx may come back for a refund Shopify goes on to make)', async () => {
    const org = await fresh();
    const refunds = shop.refundCount(12345);
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 500, bodyMatch: /refundCreate/, times: Infinity });
    const before = h.emu.requests.length;
    const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '3.00' });
    // "failed" would invite the model to try again under a new tool_use id: a new key, a second refund if this one landed.
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    expect(res.body.toolResult.content).toMatch(/Do not send it again/);
    const keys = refundKeysSince(h, before);
    expect(keys).toHaveLength(4);
    expect(new Set(keys).size).toBe(1);
    expect(keys[0]).toBeTruthy();
    expect(shop.refundCount(12345)).toBe(refunds);
  });

  // A refusal the shop answered whole is failed; the same one cut off on the way was recorded indeterminate (the agent
  // told not to resend, an operator to reconcile a refund the shop refused). Shopify's answer is judged by its status.
  for (const kind of ['status_cut', 'status_stall'] as const) {
    it(`refund: 423 (shop locked) with its body ${kind === 'status_cut' ? 'cut off by a close' : 'stalling past the budget'} is the refusal it says → failed / VENDOR_ERROR, sent once, nothing refunded`, async () => {
      const org = await fresh();
      const refunds = shop.refundCount(12345);
      h.emu.fault({ vendor: 'shopify', kind, status: 423, body: { errors: 'Unavailable Shop' }, bodyMatch: /refundCreate/ });
      const before = sent(/refundCreate/);
      const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' });
      expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
      expect(sent(/refundCreate/) - before).toBe(1);
      expect(shop.refundCount(12345)).toBe(refunds);
    });
  }

  it('refund: a 2xx cut off is still an unknown outcome (indeterminate): only an error status is judged without its body', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'shopify', kind: 'status_cut', status: 200, body: { data: { refundCreate: { refund: null, userErrors: [] } } }, bodyMatch: /refundCreate/ });
    const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' });
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
  });

  it('nango_proxy.post: a 422 cut off stays indeterminate (Nango\'s 4xx are judged by their body, which never came whole)', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'status_cut', status: 422, body: { error: { code: 'invalid_body', message: 'no' } } });
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { a: 4 } });
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
  });

  it('nango_proxy.post: 502 (the provider applied it anyway) or reset after apply → indeterminate; 429 → failed; never retried, never a Retries header', async () => {
    const org = await fresh();
    const posts = nango.appliedPosts;
    const before = h.emu.count({ vendor: 'nango' });
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'status_then_apply', status: 502, delayMs: 50 });
    const failed = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { a: 1 } });
    expect(failed.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    await waitFor(() => nango.appliedPosts - posts === 1, 'the provider to apply the POST it answered 502');
    h.emu.clearFaults();
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'reset_after', times: Infinity });
    const lost = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { a: 2 } });
    expect(lost.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    h.emu.clearFaults();
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'status', status: 429, headers: { 'retry-after': '0.1' } });
    const limited = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { a: 3 } });
    expect(limited.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' });

    expect(h.emu.count({ vendor: 'nango' }) - before).toBe(3);
    expect(nango.appliedPosts - posts).toBe(2);
    expect(h.emu.requests.filter((r) => r.vendor === 'nango').every((r) => r.headers.retries === undefined)).toBe(true);
    expect(nango.retriesHeaders).toEqual([]);
    for (const r of [failed, lost, limited]) expect((await rowOf(h, r.body.toolCallId)).retry_count).toBe(0);
  });
});
