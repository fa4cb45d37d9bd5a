import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { call } from './support.js';

/**
 * What an agent needs from order_lookup to use the other Shopify tools well (a review of the tools against what their
 * descriptions promise): the note add_note replaces (it was fetched and dropped, so "add a note" wiped the merchant's
 * own), the amounts a refund is sized by (shopify_refund.create requires an amount, and nothing gave one), and each
 * parcel's carrier and tracking page (fetched and dropped). Through the gateway, against the emulator, as the agent
 * sees them.
 */
describe('order_lookup: the facts the other Shopify tools need', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, {
      tools: ['order_lookup.lookup', 'shopify_order.add_note', 'shopify_refund.create'],
      rules: [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }],
    });
  }, 90_000);
  afterAll(async () => {
    await h?.close();
  });

  const lookup = async (): Promise<Record<string, unknown>> => {
    const res = await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.result as Record<string, unknown>;
  };

  it('gives the total, what was refunded, unit prices, the note and tracking; a note set and a refund made show in the next lookup', async () => {
    const before = await lookup();
    expect(before).toMatchObject({
      currency: 'USD',
      totalPrice: '120.00',
      totalRefunded: '0.00',
      note: null,
      tracking: [{ number: 'TRACK-001', company: 'UPS', url: 'https://www.ups.com/track?tracknum=TRACK-001' }],
      items: [
        { name: 'Aurora Trail Running Shoe - 9 / Blue', quantity: 1, unitPrice: '90.00' },
        { name: 'Merino Running Socks - M', quantity: 2, unitPrice: '15.00' },
      ],
    });
    const note = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '12345', note: 'Customer asked for gift wrap' });
    expect(note.body.status).toBe('succeeded');
    const refund = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '15.00' });
    expect(refund.body.status, JSON.stringify(refund.body)).toBe('succeeded');
    expect(await lookup()).toMatchObject({ note: 'Customer asked for gift wrap', totalRefunded: '15.00', totalPrice: '120.00' });
  });

  it('the tool definitions say what add_note replaces and which order id the tools take', async () => {
    const tools = (await h.t.http.get(`/v1/runs/${org.runId}/tools`).set({ Authorization: `Bearer ${org.agentKey}` })).body as { tools: { name: string; description: string; input_schema: { properties: Record<string, { description?: string }> } }[] };
    const text = JSON.stringify(tools);
    expect(text).toContain("order_lookup's `note`");
    expect(text).toContain('not its name such as \\"#1001\\"');
  });
});
