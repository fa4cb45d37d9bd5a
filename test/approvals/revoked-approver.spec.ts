import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emulatorEnv, setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey, startTestApp, type TestApp } from '../support/test-app.js';
import { approvalFor, refundUse, refunds } from './support.js';

/**
 * A key revoked on one replica decides nothing on another that still has it cached (5 s): the decision is a
 * write, and write routes look the key up afresh (test/pipeline/revoked-key.spec.ts). Approving is what lets a
 * refund run.
 */
describe('approvals: a revoked approver key', () => {
  let h: Harness;
  let replica: TestApp;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    replica = await startTestApp({ ...emulatorEnv(h.emu.url), APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await replica?.close();
    await h?.close();
  });

  it('another replica that still has the revoked expert key cached must not let it approve (and run) a refund', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('4.00'));
    expect(res.status).toBe(202);
    const before = refunds(h);
    // The expert reads the approval through the replica: its key is now cached there (5 s).
    const approval = await approvalFor({ ...h, t: replica } as Harness, expert.key, res.body.toolCallId);
    // An admin revokes the expert key (on the other replica).
    expect((await h.t.http.delete(`/v1/api-keys/${expert.id}`).set(adminAuth)).status).toBe(204);
    // The revoked key, on the replica, inside its cache window.
    const decided = await replica.http
      .post(`/v1/approvals/${approval.id}/decision`)
      .set(bearer(expert.key))
      .send({ decision: 'approve', actionDigest: approval.actionDigest });
    const result = await h.t.http.get(`/v1/tool-calls/${res.body.toolCallId}/result?waitMs=5000`).set(bearer(org.agentKey));
    expect({ status: decided.status, code: decided.body.code, callStatus: result.body.status, refunds: refunds(h) - before }).toEqual({
      status: 401,
      code: 'UNAUTHENTICATED',
      callStatus: 'waiting_approval',
      refunds: 0,
    });
    const rejected = await replica.http
      .post(`/v1/approvals/${approval.id}/decision`)
      .set(bearer(expert.key))
      .send({ decision: 'reject', actionDigest: approval.actionDigest });
    expect(rejected.status).toBe(401);
    const [row] = (await h.t.ds.query('SELECT status, decided_by FROM approval_requests WHERE id = $1', [approval.id])) as unknown[];
    expect(row).toEqual({ status: 'pending', decided_by: null });
    // A live expert key still decides it, and the refund runs once.
    const other = await createKey(h.t, org.orgId, 'expert');
    const ok = await replica.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(other.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(ok.status).toBe(200);
    const done = await h.t.http.get(`/v1/tool-calls/${res.body.toolCallId}/result?waitMs=10000`).set(bearer(org.agentKey));
    expect(done.body.status).toBe('succeeded');
    expect(refunds(h) - before).toBe(1);
  });
});
