import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, verifyLedger } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * The policy decision a block by a rule (or an approval request) recorded on the ledger has its row, which the detail
 * view shows: a row deleted around the gateway is a break, as a deleted approval row is. Calls no decision was
 * recorded for (blocked by the flag, off the manifest) have none to miss.
 */
describe('verify: a deleted policy decision row', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({});
  });
  afterAll(async () => {
    await h?.close();
  });

  const verify = (orgId: string) => verifyLedger(h.t, orgId);
  const deleteDecision = async (id: string) => {
    await h.t.ds.query('UPDATE tool_calls SET policy_decision_id = NULL WHERE id = $1', [id]);
    await h.t.ds.query('DELETE FROM policy_decisions WHERE tool_call_id = $1', [id]);
  };

  it('a call blocked by a rule whose decision row is deleted is a break', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'], rules: [{ id: 'no-notes', match: { toolName: 'shopify_order.add_note' }, decision: 'block' }] });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey))
      .send(toolUse('shopify_order', { action: 'add_note', orderId: '12345', note: 'hello' }));
    expect([res.body.status, res.body.errorCode]).toEqual(['blocked', 'POLICY_BLOCKED']);
    expect((await verify(org.orgId)).ok).toBe(true);
    await deleteDecision(res.body.toolCallId as string);
    const v = await verify(org.orgId);
    expect(v.ok).toBe(false);
    expect(v.brokenAt?.reason).toContain('has no decision row');
  });

  it('an approval request whose decision row is deleted is a break', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey))
      .send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '5.00' }));
    expect(res.body.status).toBe('waiting_approval');
    expect((await verify(org.orgId)).ok).toBe(true);
    await deleteDecision(res.body.toolCallId as string);
    expect((await verify(org.orgId)).brokenAt?.reason).toContain('has no decision row');
  });

  it('a call blocked before any policy decision (off the manifest) has none to miss', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey))
      .send(toolUse('shopify_order', { action: 'add_note', orderId: '12345', note: 'hello' }));
    expect(res.body.errorCode).toBe('NOT_IN_MANIFEST');
    expect((await verify(org.orgId)).ok).toBe(true);
  });
});
