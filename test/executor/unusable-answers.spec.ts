import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { NangoEmulator, ShopifyEmulator } from '../../src/emulator/index.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { call, eventsOf, rowOf, send } from './support.js';

const MAX_BYTES = 64 * 1024;
const TOOLS = ['nango_proxy.get', 'nango_proxy.post', 'shopify_refund.create', 'shopify_order.add_note', 'order_lookup.lookup'];
const RULES = [
  { id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' },
  { id: 'allow-nango-post', match: { toolName: 'nango_proxy.post' }, decision: 'allow' },
];

/**
 * A vendor that answered 2xx has accepted the request, and usually acted on it.
 * When that answer cannot be used (not JSON although it says so, cut off, over
 * VENDOR_MAX_RESPONSE_BYTES) a write is of unknown outcome — indeterminate /
 * OUTCOME_UNKNOWN, never resent — while a read stays failed / VENDOR_ERROR.
 */
describe('writes answered 2xx with a body the gateway cannot use, through the pipeline', () => {
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
  const sent = (re: RegExp) => h.emu.requests.filter((r) => re.test(r.body)).length;

  /** The call ended indeterminate / OUTCOME_UNKNOWN after one attempt; its ledger row. */
  async function expectUnknown(res: Awaited<ReturnType<typeof call>>): Promise<Record<string, unknown>> {
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', result: null, toolResult: { is_error: true } });
    expect(res.body.toolResult.content).toMatch(/Do not send it again/);
    const row = await rowOf(h, res.body.toolCallId);
    expect(row).toMatchObject({ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN', retry_count: 0 });
    expect((await eventsOf(h, res.body.toolCallId)).at(-1)).toMatchObject({ type: 'tool_call.indeterminate', metadata: { errorCode: 'OUTCOME_UNKNOWN' } });
    return row;
  }

  it('nango_proxy.post: upstream applies the POST and answers 201 with JSON cut off → indeterminate, sent once, not replayed; a GET so answered stays failed', async () => {
    const org = await fresh();
    const posts = nango.appliedPosts;
    const before = h.emu.count({ vendor: 'nango', method: 'POST' });
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'malformed_after', times: Infinity });
    const use = toolUse('nango_proxy', { action: 'post', path: 'v1/notes', body: { text: 'cut off' } });
    const res = await send(h, org, use);
    const row = await expectUnknown(res);
    expect(row.vendor_status).toBe(201);
    expect(nango.appliedPosts - posts).toBe(1);
    expect(h.emu.count({ vendor: 'nango', method: 'POST' }) - before).toBe(1);

    const again = await send(h, org, use);
    expect(again.body).toMatchObject({ toolCallId: res.body.toolCallId, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', replayed: true });
    expect(h.emu.count({ vendor: 'nango', method: 'POST' }) - before).toBe(1);

    // A read is safe to retry: it keeps its failed / VENDOR_ERROR.
    h.emu.fault({ vendor: 'nango', method: 'GET', kind: 'malformed_after' });
    const get = await call(h, org, 'nango_proxy', { action: 'get', path: 'v1/notes' });
    expect(get.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
  });

  it('nango_proxy.post: upstream applies the POST and answers 201 over VENDOR_MAX_RESPONSE_BYTES → indeterminate, sent once; a refusal over the cap stays failed', async () => {
    const org = await fresh();
    const posts = nango.appliedPosts;
    const before = h.emu.count({ vendor: 'nango', method: 'POST' });
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'huge_after', sizeBytes: MAX_BYTES * 3, times: Infinity });
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { text: 'huge' } });
    const row = await expectUnknown(res);
    expect(row.vendor_status).toBe(201);
    expect(nango.appliedPosts - posts).toBe(1);
    expect(h.emu.count({ vendor: 'nango', method: 'POST' }) - before).toBe(1);

    // A write the upstream refused (4xx) is a refusal whatever the size of its body.
    h.emu.clearFaults();
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'status', status: 422, body: { errors: 'x'.repeat(MAX_BYTES * 2) } });
    const refused = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { text: 'refused' } });
    expect(refused.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
  });

  it('nango_proxy.post: upstream 201 labelled application/json whose body is not JSON → indeterminate', async () => {
    const org = await fresh();
    h.emu.fault({ vendor: 'nango', method: 'POST', kind: 'status', status: 201, headers: { 'content-type': 'application/json' }, body: 'created, id=42' });
    const res = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/notes', body: { text: 'plain' } });
    await expectUnknown(res);
  });

  it('shopify_refund.create: the refund is made and the 200 is cut off or oversized → indeterminate, one refund, never resent; a lookup so answered stays failed', async () => {
    const org = await fresh();
    for (const kind of ['malformed_after', 'huge_after'] as const) {
      const refunds = shop.refundCount(12345);
      const before = sent(/refundCreate/);
      h.emu.fault({ vendor: 'shopify', kind, sizeBytes: MAX_BYTES * 2, bodyMatch: /refundCreate/, times: Infinity });
      const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '1.50' });
      h.emu.clearFaults();
      const row = await expectUnknown(res);
      expect(row.vendor_status, kind).toBe(200);
      expect(shop.refundCount(12345) - refunds, kind).toBe(1);
      expect(sent(/refundCreate/) - before, kind).toBe(1);
    }
    h.emu.fault({ vendor: 'shopify', kind: 'huge_after', sizeBytes: MAX_BYTES * 2 });
    const lookup = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
    expect(lookup.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_ERROR' });
  });

  it('shopify_order.add_note: a 200 cut off after the note was set → indeterminate, not resent', async () => {
    const org = await fresh();
    const before = sent(/orderUpdate/);
    h.emu.fault({ vendor: 'shopify', kind: 'malformed_after', bodyMatch: /orderUpdate/, times: Infinity });
    const res = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '1003', note: 'answer cut off' });
    await expectUnknown(res);
    expect(shop.order(1003)?.note).toBe('answer cut off');
    expect(sent(/orderUpdate/) - before).toBe(1);
  });
});
