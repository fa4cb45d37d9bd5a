import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ShopifyEmulator } from '../../src/emulator/index.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { call } from './support.js';

/**
 * A write the vendor refused (429) is retried only with a quarter of the call's budget left: sent later, its answer
 * would likely come past the deadline and the call end indeterminate (ops reconcile it; the agent is told not to send
 * it again) though the vendor had cleanly refused it. The refusal, with its Retry-After, is the better answer then.
 */
describe('a write retried after a refusal needs room for its answer', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '2000' });
  });
  afterEach(() => {
    h.emu.clearFaults();
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    await h?.close();
  });

  const noteWrites = (from: number) => h.emu.requests.slice(from).filter((r) => /orderUpdate/.test(r.body));

  it('add_note refused 429 with Retry-After 1.9 s of a 2 s budget: not sent again; failed VENDOR_RATE_LIMITED, the note unchanged', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0); // no jitter: the retry would fall due ~100 ms before the deadline
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'], vendors: ['shopify'] });
    const shop = h.emu.vendor<ShopifyEmulator>('shopify');
    const before = shop.order(1001)?.note;
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'retry-after': '1.9' }, bodyMatch: /orderUpdate/, times: 1 });
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 250, bodyMatch: /orderUpdate/, times: 1 });
    const from = h.emu.requests.length;
    const res = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '1001', note: 'late retry' });
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' });
    expect(noteWrites(from)).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 300)); // nothing in flight that could still land
    expect(shop.order(1001)?.note).toBe(before);
  });

  it('with room left (Retry-After 0.2 s) the same refusal is retried and the note written once', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0);
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'], vendors: ['shopify'] });
    const shop = h.emu.vendor<ShopifyEmulator>('shopify');
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'retry-after': '0.2' }, bodyMatch: /orderUpdate/, times: 1 });
    const from = h.emu.requests.length;
    const res = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '1001', note: 'retried in time' });
    expect(res.body).toMatchObject({ status: 'succeeded' });
    expect(noteWrites(from)).toHaveLength(2);
    expect(shop.order(1001)?.note).toBe('retried in time');
  });
});
