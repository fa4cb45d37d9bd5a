/**
 * Pinned after a mutation review found nothing did: each passes on this code and fails on a
 * mutant of src/ledger/tool-call-check.ts (approvalMismatch, lines 217 and 228). The approval row the detail view shows (GET
 * /v1/tool-calls/:id: kind, risk level, who decided in which role) is not chained; verify holds it to its events.
 *  - V18: `if ((requested.kind !== null && a.kind !== requested.kind) || (… a.riskLevel !== requested.riskLevel))` → `if (false)`
 *  - V19: drop `|| a.decidedRole !== decided.actorRole`
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decidedRefund } from '../approvals/support.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth, createKey } from '../support/test-app.js';

describe('verify: the approval row\'s kind, risk level and decider role against the events', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const verify = async (orgId: string) => (await h.t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth)).body as { ok: boolean; brokenAt?: { reason: string } };

  async function approvedRefund() {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const { id, approval } = await decidedRefund(h, org, expert.key, '9.00', 'approve');
    expect(await verify(org.orgId)).toMatchObject({ ok: true });
    return { org, id, approval };
  }

  it.each([
    ['risk level rewritten (a high-risk refund shown as low risk)', `risk_level = 'low'`],
    ['kind rewritten (an expert approval shown as the customer\'s)', `kind = 'client'`],
  ])('%s is a break (V18)', async (_what, set) => {
    const { org, id, approval } = await approvedRefund();
    await h.t.ds.query(`UPDATE approval_requests SET ${set} WHERE id = $1`, [approval.id]);
    const v = await verify(org.orgId);
    expect(v).toMatchObject({ ok: false });
    expect(v.brokenAt?.reason).toBe(`tool call ${id}: its approval row differs from the request its event recorded`);
  });

  it('the decider\'s role rewritten (an expert decision shown as an admin\'s) is a break (V19)', async () => {
    const { org, id, approval } = await approvedRefund();
    await h.t.ds.query(`UPDATE approval_requests SET decided_role = 'admin' WHERE id = $1`, [approval.id]);
    const v = await verify(org.orgId);
    expect(v).toMatchObject({ ok: false });
    expect(v.brokenAt?.reason).toBe(`tool call ${id}: its approval row differs from the decision its event recorded`);
  });
});
