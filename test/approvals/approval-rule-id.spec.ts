import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';
import { approvalFor, refundUse } from './support.js';

/**
 * An approval's ruleId was read through the call's current policy decision, which the claim of an approved call moves
 * to a new decision when the call is judged again under a changed policy: the approval then named the rule that
 * blocked the call as "the policy rule that asked for the approval". It is the call's first decision to ask.
 */
describe('an approval names the rule that asked for it, also after a later rule blocked the approved call', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  }, 90_000);
  afterAll(async () => {
    await h?.close();
  });

  it('ruleId stays "refunds-need-an-expert" after "no-refunds" blocks the approved refund', async () => {
    const org = await setupOrg(h.t, {
      tools: ['shopify_refund.create'],
      rules: [{ id: 'refunds-need-an-expert', match: { toolName: 'shopify_refund.create' }, decision: 'require_expert_approval', reason: 'checked' }],
    });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('7.00'));
    expect(res.status).toBe(202);
    const toolCallId = res.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, toolCallId);
    expect((await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(expert.key))).body.ruleId).toBe('refunds-need-an-expert');
    const put = await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({
      rules: [{ id: 'no-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'block', riskLevel: 'high', reason: 'fraud incident' }],
    });
    expect(put.status).toBe(200);
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    const result = await h.t.http.get(`/v1/tool-calls/${toolCallId}/result?waitMs=8000`).set(bearer(org.agentKey));
    expect(result.body.errorCode).toBe('POLICY_BLOCKED');
    const after = (await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(expert.key))).body;
    const story = (await h.t.http.get(`/v1/tool-calls/${toolCallId}`).set(adminAuth)).body;
    expect(after.ruleId).toBe('refunds-need-an-expert');
    expect(story.approval.ruleId).toBe('refunds-need-an-expert');
  });
});
