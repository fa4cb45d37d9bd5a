import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { ToolCallResultsService } from '../../src/tool-calls/tool-call-results.service.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { aroundStatements, approvalFor, refundUse } from './support.js';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';

/** The shared look-up's delay; a wake-up answers well within half of it. */
const SLOW_LOOKUP_MS = 6_000;

/**
 * README "The agent's side": a long-poll "returns as soon as the call settles ... at once when it settles on the same
 * replica, within 200 ms on another". Here there is one replica; the shared cross-replica look-up (every 200 ms) is made
 * slow (6 s, as under database load) so that only the same-replica wake-up can answer in time. Every way an approval
 * settles wakes it: a run, a rejection, an expiry, the run's end.
 */
describe('a long-poll on a call waiting for approval wakes when it settles on this replica', () => {
  let h: Harness;
  let undo: () => void = () => undefined;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (text.includes('t.status <> ALL($2::text[])')) await new Promise((r) => setTimeout(r, SLOW_LOOKUP_MS));
      return send();
    });
  });
  afterAll(async () => {
    undo();
    await h?.close();
  });

  async function pollWhile(decideIt: (org: { runId: string; agentKey: string; orgId: string }, approval: { id: string; actionDigest: string }, expertKey: string) => Promise<void>) {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('0.77'));
    expect(res.status).toBe(202);
    const approval = await approvalFor(h, expert.key, res.body.toolCallId);
    const poll = h.t.http.get(`/v1/tool-calls/${res.body.toolCallId}/result?waitMs=10000`).set(bearer(org.agentKey)).then((r) => ({ r, at: performance.now() }));
    await waitFor(() => h.t.app.get(ToolCallResultsService).waitingOn(res.body.toolCallId) > 0, 'the long-poll to wait');
    await decideIt(org, approval, expert.key);
    const decidedAt = performance.now();
    const { r, at } = await poll;
    return { body: r.body as { status: string; errorCode: string | null }, ms: at - decidedAt };
  }

  it('control: an approved call that runs wakes the long-poll at once', async () => {
    const { body, ms } = await pollWhile(async (_org, a, expertKey) => {
      expect((await h.t.http.post(`/v1/approvals/${a.id}/decision`).set(bearer(expertKey)).send({ decision: 'approve', actionDigest: a.actionDigest })).status).toBe(200);
    });
    expect(body.status).toBe('succeeded');
    expect(ms).toBeLessThan(SLOW_LOOKUP_MS / 2);
  });

  it('a rejection wakes the long-poll at once (not at the next shared look-up)', async () => {
    const { body, ms } = await pollWhile(async (_org, a, expertKey) => {
      expect((await h.t.http.post(`/v1/approvals/${a.id}/decision`).set(bearer(expertKey)).send({ decision: 'reject', actionDigest: a.actionDigest })).status).toBe(200);
    });
    expect(body).toMatchObject({ status: 'blocked', errorCode: 'EXPERT_REJECTED' });
    expect(ms).toBeLessThan(SLOW_LOOKUP_MS / 2);
  });

  it('a run ended while the call waits wakes the long-poll at once', async () => {
    const { body, ms } = await pollWhile(async (org) => {
      expect((await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.agentKey)).send({})).status).toBe(200);
    });
    expect(body).toMatchObject({ status: 'blocked', errorCode: 'RUN_NOT_ACTIVE' });
    expect(ms).toBeLessThan(SLOW_LOOKUP_MS / 2);
  });

  it("an expiry written by the approvals sweep wakes the long-poll at once", async () => {
    const { body, ms } = await pollWhile(async (_org, a) => {
      await h.t.ds.query(`UPDATE approval_requests SET expires_at = now() - interval '1 second' WHERE id = $1`, [a.id]);
      expect((await h.t.app.get(ApprovedCallRunner).sweep()).expired).toBeGreaterThanOrEqual(1);
    });
    expect(body).toMatchObject({ status: 'blocked', errorCode: 'APPROVAL_EXPIRED' });
    expect(ms).toBeLessThan(SLOW_LOOKUP_MS / 2);
  });
});
