/**
 * README "Metrics": tool_calls_total counts calls "as answered to the caller: a call waiting for approval counts then
 * and again when it runs; calls settled by a reject, an expiry, a run end or the orphan sweep are in the ledger, not
 * here". An approved call that the kill switch (tool_calling_enabled off) or a new block rule stops at its claim is
 * none of those: it is answered blocked / FEATURE_DISABLED (GET …/result, a re-post), is in the ledger and in usage
 * as blocked, yet tool_calls_total did not count it: during an incident the FEATURE_DISABLED series missed exactly
 * the approved calls the switch stopped. It is counted now (README "Metrics").
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';
import { approvalFor, refundUse } from './support.js';

const series = async (h: Harness, match: string): Promise<number> => {
  const line = (await h.t.http.get('/metrics')).text.split('\n').find((l) => l.startsWith(`tool_calls_total{${match}}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
};

describe('tool_calls_total and an approved call blocked at its claim', () => {
  let h: Harness;
  beforeAll(async () => { h = await startHarness({}); });
  afterAll(async () => { await h?.close(); });

  it('counts blocked / FEATURE_DISABLED as the ledger and usage record it', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = (await createKey(h.t, org.orgId, 'expert')).key;
    const ops = (await createKey(h.t, org.orgId, 'ops')).key;
    const label = 'tool="shopify_refund",action="create",status="blocked",error_code="FEATURE_DISABLED"';
    const before = await series(h, label);
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('2.00'));
    expect(posted.status).toBe(202);
    const approval = await approvalFor(h, expert, posted.body.toolCallId);
    await h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false });
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    const result = await h.t.http.get(`/v1/tool-calls/${posted.body.toolCallId}/result?waitMs=5000`).set(bearer(org.agentKey));
    expect(result.body).toMatchObject({ status: 'blocked', errorCode: 'FEATURE_DISABLED' });
    const usage = await h.t.http.get(`/v1/orgs/${org.orgId}/usage`).set(bearer(ops));
    expect(usage.body.byTool[0]).toMatchObject({ calls: 1, blocked: 1 });

    expect(await series(h, label)).toBe(before + 1);
  });
});
