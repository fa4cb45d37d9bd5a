/**
 * Pinned after a mutation review found nothing did: passes on this code and fails on the mutant
 * tool-call-check.ts:251 (decisionMismatch) dropping `if (d.digest !== r.action_digest) return off(null);`.
 * The policy decision row the detail view shows is tied to the call by its action digest; a decision row re-pointed
 * at another action (its digest rewritten) must break verify.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { refundUse } from '../approvals/support.js';
import { adminAuth, bearer } from '../support/test-app.js';

const BLOCK_REFUNDS = [{ id: 'no-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'block', riskLevel: 'high', reason: 'fraud incident' }];

describe('verify: the policy decision row\'s action digest', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });
  const verify = async (orgId: string) => (await h.t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth)).body as { ok: boolean; brokenAt?: { reason: string } };

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
