import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, rowOf } from '../executor/support.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';

/**
 * A param holding half of a UTF-16 surrogate pair (an emoji the model cut in two) is refused before anything is sent:
 * JSON.parse accepts "\ud83d", but the text has no UTF-8 form, so Shopify would be sent the escape — which its JSON
 * parser (Ruby's) refuses, or once stored as "?" — while the ledger, the policy and an approver see U+FFFD. Before, a
 * note holding one was sent as written, by add_note and inside a refund.
 */
describe('a param holding a lone UTF-16 surrogate', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, {
      tools: ['shopify_order.add_note', 'shopify_refund.create', 'nango_proxy.post'],
      vendors: ['shopify', 'nango'],
      rules: [
        { id: 'a', match: { toolName: 'shopify_refund.create' }, decision: 'allow' },
        { id: 'b', match: { toolName: 'shopify_order.add_note' }, decision: 'allow' },
      ],
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  const sentSince = (from: number, op: RegExp) => h.emu.requests.slice(from).filter((r) => op.test(r.body));

  it('add_note: 422 INVALID_INPUT naming the note, nothing sent, the note recorded repaired', async () => {
    const from = h.emu.requests.length;
    const res = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '12345', note: 'Leave at the door \ud83d' });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'INVALID_INPUT' });
    expect(res.body.toolResult.content).toMatch(/note: must be well-formed text: it holds half of a UTF-16 surrogate pair/);
    expect(sentSince(from, /orderUpdate/)).toHaveLength(0);
    const row = await rowOf(h, res.body.toolCallId);
    expect(row.input_redacted).toMatchObject({ note: 'Leave at the door \ufffd' });
    expect(row.started_at).toBeNull();
  });

  it('a whole emoji (a pair) goes through and is sent as written', async () => {
    const from = h.emu.requests.length;
    const res = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '12345', note: 'Gift wrap 🎁' });
    expect(res.body.status).toBe('succeeded');
    const sent = sentSince(from, /orderUpdate/);
    expect(sent).toHaveLength(1);
    expect(JSON.parse(sent[0].body).variables.input.note).toBe('Gift wrap 🎁');
  });

  it('a refund note: refused before the refund is sent', async () => {
    const from = h.emu.requests.length;
    const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '1.00', note: 'Sorry \udc00' });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ errorCode: 'INVALID_INPUT' });
    expect(sentSince(from, /refundCreate|order\(/)).toHaveLength(0);
  });

  it('deep in a Nango body, a key or a value: refused by its path, before an approval is asked', async () => {
    const value = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/tickets', body: { items: ['ok', { title: 'cut \ud83d' }] } });
    expect(value.status).toBe(422);
    expect(value.body.toolResult.content).toContain('body.items.1.title: must be well-formed text');
    const key = await call(h, org, 'nango_proxy', { action: 'post', path: 'v1/tickets', body: { fields: { ['name\ud800']: 1 } } });
    expect(key.status).toBe(422);
    expect(key.body.toolResult.content).toContain('body.fields.name\ufffd: must be well-formed text');
    const approvals = (await h.t.ds.query('SELECT count(*)::int AS n FROM approval_requests WHERE tool_call_id = ANY($1)', [[value.body.toolCallId, key.body.toolCallId]])) as { n: number }[];
    expect(approvals[0].n).toBe(0);
  });
});
