import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { call } from './support.js';

/**
 * Shopify's OrderInput.note overwrites the order's one note (VENDORS.md §1.7), and "" clears it. add_note's schema
 * asked for at least one character, so "remove the note on order 12345" was refused with "note: must NOT have fewer
 * than 1 characters", and the only way around it left to a model was a note of one blank, which was sent as such.
 */
describe('shopify_order.add_note: clearing the note', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['shopify_order.add_note', 'order_lookup.lookup'], rules: [{ id: 'b', match: { toolName: 'shopify_order.add_note' }, decision: 'allow' }] });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('note "" is sent as the new, empty note, and the order then has none', async () => {
    const set = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '12345', note: 'Leave at the door' });
    expect(set.body.status).toBe('succeeded');
    expect((await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' })).body.result.note).toBe('Leave at the door');
    const from = h.emu.requests.length;
    const cleared = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '12345', note: '' });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ status: 'succeeded', result: { orderId: '12345', note: '' } });
    const sent = h.emu.requests.slice(from).filter((r) => r.body.includes('orderUpdate'));
    expect(sent.map((r) => (JSON.parse(r.body) as { variables: { input: { note: unknown } } }).variables.input.note)).toEqual(['']);
    const read = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
    expect(read.body.status).toBe('succeeded');
    expect(read.body.result.note).toBe('');
  });
});
