import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { approvalFor, decidedRefund, refundUse, refunds } from '../approvals/support.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';

const BLOCK_REFUNDS = [{ id: 'no-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'block', riskLevel: 'high', reason: 'fraud incident' }];

/**
 * The approval and policy decision rows the detail view shows (GET /v1/tool-calls/:id "tells the whole story")
 * against the chained events that recorded them. Each edit is plain SQL within the app role's rights (no trigger
 * bypass); before, verify never read either table and answered ok beside a story that contradicted its chain.
 */
describe('verify: approval and policy decision rows against their events', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const verify = async (orgId: string) => (await h.t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth)).body as { ok: boolean; brokenAt?: { reason: string } };

  async function refundDecidedInNewOrg(decision: 'approve' | 'reject') {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const scapegoat = await createKey(h.t, org.orgId, 'expert');
    const { id, approval } = await decidedRefund(h, org, expert.key, '9.00', decision);
    expect(await verify(org.orgId)).toMatchObject({ ok: true });
    return { org, id, approval, expert, scapegoat };
  }

  it('an approver rewritten to another key is a break at the tool_call.approved event', async () => {
    const { org, id, approval, expert, scapegoat } = await refundDecidedInNewOrg('approve');
    await h.t.ds.query(`UPDATE approval_requests SET decided_by = $2, decision_reason = 'looked fine to me' WHERE id = $1`, [approval.id, scapegoat.id]);
    const story = (await h.t.http.get(`/v1/tool-calls/${id}`).set(adminAuth)).body as { approval: { decidedBy: string }; events: { type: string; actor: { keyId: string } | null }[] };
    expect(story.approval.decidedBy).toBe(scapegoat.id);
    expect(story.events.find((e) => e.type === 'tool_call.approved')?.actor?.keyId).toBe(expert.id);
    const v = await verify(org.orgId);
    expect(v).toMatchObject({ ok: false });
    expect(v.brokenAt?.reason).toBe(`tool call ${id}: its approval row differs from the decision its event recorded`);
  });

  it('a rejection rewritten as an approval (the call stays blocked) is a break', async () => {
    const { org, approval } = await refundDecidedInNewOrg('reject');
    await h.t.ds.query(`UPDATE approval_requests SET status = 'approved' WHERE id = $1`, [approval.id]);
    expect(await verify(org.orgId)).toMatchObject({ ok: false });
  });

  it('an approval forged by an inserted event, its approval row still pending, is a break (after the sweep ran it)', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('7.00'));
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const id = res.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, id);
    await h.t.ds.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata)
       SELECT gen_random_uuid(), org_id, 'tool_call.approved', run_id, id, jsonb_build_object('keyId', $2::uuid, 'role', 'expert'),
              jsonb_build_object('toolName', tool_name, 'action', action, 'digest', action_digest, 'approvalId', $3::uuid,
                                 'kind', 'expert', 'decision', 'approved', 'errorCode', NULL, 'reason', NULL)
         FROM tool_calls WHERE id = $1`,
      [id, expert.id, approval.id],
    );
    await h.t.ds.query(`UPDATE tool_calls SET status = 'approved' WHERE id = $1`, [id]);
    const before = refunds(h);
    await h.t.app.get(ApprovedCallRunner).sweep();
    expect(((await h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=8000`).set(bearer(org.agentKey))).body as { status: string }).status).toBe('succeeded');
    expect(refunds(h)).toBe(before + 1);
    expect(await verify(org.orgId)).toMatchObject({ ok: false });
  });

  it('the same forgery without naming the approval: a pending approval whose call moved on is a break', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('6.00'));
    const id = res.body.toolCallId as string;
    await h.t.ds.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, metadata)
       SELECT gen_random_uuid(), org_id, 'tool_call.approved', run_id, id, jsonb_build_object('toolName', tool_name, 'action', action, 'digest', action_digest)
         FROM tool_calls WHERE id = $1`,
      [id],
    );
    await h.t.ds.query(`UPDATE tool_calls SET status = 'approved' WHERE id = $1`, [id]);
    const v = await verify(org.orgId);
    expect(v).toMatchObject({ ok: false });
    expect(v.brokenAt?.reason).toBe(`tool call ${id} is approved, but its approval is still pending`);
  });

  it('a blocking policy decision rewritten to another rule and "allow" is a break; a started call whose decision reads "block" too', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create', 'order_lookup.lookup'], rules: BLOCK_REFUNDS });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('5.00'));
    expect(res.body.status, JSON.stringify(res.body)).toBe('blocked');
    const id = res.body.toolCallId as string;
    expect(await verify(org.orgId)).toMatchObject({ ok: true });
    await h.t.ds.query(`UPDATE policy_decisions SET decision = 'allow', rule_id = 'allow-refunds', risk_level = 'low', reason = 'ok' WHERE tool_call_id = $1`, [id]);
    const story = (await h.t.http.get(`/v1/tool-calls/${id}`).set(adminAuth)).body as { policyDecision: { decision: string; ruleId: string } };
    expect(story.policyDecision).toMatchObject({ decision: 'allow', ruleId: 'allow-refunds' });
    const v = await verify(org.orgId);
    expect(v).toMatchObject({ ok: false });
    expect(v.brokenAt?.reason).toBe(`tool call ${id}: its policy decision differs from the one its events recorded`);

    const other = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const ok = await h.t.http.post(`/v1/runs/${other.runId}/tool-calls`).set(bearer(other.agentKey)).send({ type: 'tool_use', id: 'toolu_lookup_1', name: 'order_lookup', input: { action: 'lookup', orderId: '12345' } });
    expect(ok.body.status, JSON.stringify(ok.body)).toBe('succeeded');
    expect(await verify(other.orgId)).toMatchObject({ ok: true });
    await h.t.ds.query(`UPDATE policy_decisions SET decision = 'block' WHERE tool_call_id = $1`, [ok.body.toolCallId]);
    expect(await verify(other.orgId)).toMatchObject({ ok: false });
  });
  // The approval row's kind, risk level and decider role, and the decision row's action digest: nothing pinned them
  // until a mutation review dropped each comparison from tool-call-check.ts and every spec still passed.
  it.each([
    ['risk level rewritten (a high-risk refund shown as low risk)', `risk_level = 'low'`],
    ['kind rewritten (an expert approval shown as the customer\'s)', `kind = 'client'`],
  ])('%s is a break', async (_what, set) => {
    const { org, id, approval } = await refundDecidedInNewOrg('approve');
    await h.t.ds.query(`UPDATE approval_requests SET ${set} WHERE id = $1`, [approval.id]);
    const v = await verify(org.orgId);
    expect(v).toMatchObject({ ok: false });
    expect(v.brokenAt?.reason).toBe(`tool call ${id}: its approval row differs from the request its event recorded`);
  });

  it('the decider\'s role rewritten (an expert decision shown as an admin\'s) is a break', async () => {
    const { org, id, approval } = await refundDecidedInNewOrg('approve');
    await h.t.ds.query(`UPDATE approval_requests SET decided_role = 'admin' WHERE id = $1`, [approval.id]);
    const v = await verify(org.orgId);
    expect(v).toMatchObject({ ok: false });
    expect(v.brokenAt?.reason).toBe(`tool call ${id}: its approval row differs from the decision its event recorded`);
  });

  it('a blocked call whose decision row names another action digest is a break', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: BLOCK_REFUNDS });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('5.00'));
    expect(res.body.status, JSON.stringify(res.body)).toBe('blocked');
    const id = res.body.toolCallId as string;
    expect(await verify(org.orgId)).toMatchObject({ ok: true });
    await h.t.ds.query(`UPDATE policy_decisions SET action_digest = repeat('ab', 32) WHERE tool_call_id = $1`, [id]);
    const v = await verify(org.orgId);
    expect(v).toMatchObject({ ok: false });
    expect(v.brokenAt?.reason).toBe(`tool call ${id}: its policy decision differs from the one its events recorded`);
  });
});
