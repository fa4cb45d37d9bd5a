import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { cloneWaitingCalls, seedingClient, stopSweep } from '../approvals/backlog-seed.js';
import { refundUse, refunds, waitingRefund } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * Ending a run (complete/cancel) whose agent filled the approval queue: it used to reject the whole backlog in one
 * statement (every pending approval locked and rejected, its call blocked, its input deleted, an event each), which
 * outlasted the statement timeout — 503, rolled back, every retry the same: a runaway run could not be stopped. The
 * end is now a bounded statement (the run ended, calls approved but not started blocked) with a first batch, the rest
 * rejected a batch at a time, in the request for a while and then after it. Every approval still ends rejected, its
 * call blocked RUN_NOT_ACTIVE, as before. The statement timeout here is 1 s (DB_QUERY_TIMEOUT_MS 2000) for production's
 * 15 s, and the approvals sweep is stopped.
 */
describe('ending a run with a large backlog of pending approvals', () => {
  const BACKLOG = 30_000;
  let h: Harness;
  let seeder: pg.Client;
  let db: DataSource;

  const pendingOf = async (runId: string): Promise<number> =>
    ((await h.t.ds.query(`SELECT count(*)::int AS n FROM approval_requests WHERE run_id = $1 AND status = 'pending'`, [runId])) as [{ n: number }])[0].n;
  async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600', DB_QUERY_TIMEOUT_MS: '2000' });
    await stopSweep(h);
    ({ client: seeder, db } = await seedingClient());
  }, 60_000);
  afterAll(async () => {
    await seeder?.end();
    await h?.close();
  });

  it(`an admin cancels a run with ${BACKLOG} pending approvals: 200 at once, and every approval ends rejected, its call blocked RUN_NOT_ACTIVE`, async () => {
    const org: OrgSetup = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const admin = (await h.t.ds.query('SELECT id FROM api_keys WHERE org_id = $1 AND role = $2', [org.orgId, 'admin'])) as { id: string }[];
    const res0 = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('9.99'));
    expect(res0.status).toBe(202);
    await cloneWaitingCalls(db, res0.body.toolCallId as string, BACKLOG);
    await seeder.query(`UPDATE approval_requests SET expires_at = now() + interval '1 hour' WHERE run_id = $1`, [org.runId]); // pending, not overdue
    await seeder.query('ANALYZE approval_requests; ANALYZE tool_calls; ANALYZE tool_call_inputs');
    const total = BACKLOG + 1;
    expect(await pendingOf(org.runId)).toBe(total);

    const t0 = performance.now();
    const res = await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.adminKey)).send({ reason: 'runaway agent' });
    const ms = performance.now() - t0;
    expect([res.status, res.body.code], JSON.stringify(res.body)).toEqual([200, undefined]);
    expect(res.body).toMatchObject({ id: org.runId, status: 'cancelled', pendingApprovalCount: 0, ended: { reason: 'runaway agent' } });
    expect(ms).toBeLessThan(15_000); // generous: the request stops rejecting after about a second
    // Ended at once: new calls are refused.
    const late = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('1.00', '777'));
    expect([late.status, late.body.code]).toEqual([409, 'RUN_NOT_ACTIVE']);
    expect((await h.t.http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey))).body).toMatchObject({ status: 'cancelled', pendingApprovalCount: 0 });

    // The rest after the answer, a batch at a time.
    await until('every approval rejected', async () => (await pendingOf(org.runId)) === 0, 90_000);
    const approvals = (await h.t.ds.query(
      `SELECT status, decided_by, decided_role, decision_reason, count(*)::int AS n FROM approval_requests WHERE run_id = $1 GROUP BY 1, 2, 3, 4`,
      [org.runId],
    )) as unknown[];
    expect(approvals).toEqual([{ status: 'rejected', decided_by: admin[0].id, decided_role: 'admin', decision_reason: 'runaway agent', n: total }]);
    expect(await h.t.ds.query(`SELECT status, error_code, http_status, count(*)::int AS n FROM tool_calls WHERE run_id = $1 GROUP BY 1, 2, 3`, [org.runId])).toEqual([
      { status: 'blocked', error_code: 'RUN_NOT_ACTIVE', http_status: 403, n: total },
    ]);
    const [{ inputs }] = (await h.t.ds.query(`SELECT count(*)::int AS inputs FROM tool_call_inputs i JOIN tool_calls t ON t.id = i.tool_call_id WHERE t.run_id = $1`, [
      org.runId,
    ])) as [{ inputs: number }];
    expect(inputs).toBe(0);
    // One tool_call.blocked event per call, naming its approval, by the key that ended the run; and the run's event.
    const [blocked] = (await h.t.ds.query(
      `SELECT count(*)::int AS n, count(DISTINCT tool_call_id)::int AS calls, count(DISTINCT metadata->>'approvalId')::int AS approvals,
              bool_and(metadata->>'errorCode' = 'RUN_NOT_ACTIVE' AND metadata->>'reason' = 'run_ended') AS run_ended,
              bool_and(actor->>'keyId' = $2 AND actor->>'role' = 'admin') AS by_admin
         FROM runtime_ledger_events WHERE run_id = $1 AND type = 'tool_call.blocked'`,
      [org.runId, admin[0].id],
    )) as { n: number; calls: number; approvals: number; run_ended: boolean; by_admin: boolean }[];
    expect(blocked).toEqual({ n: total, calls: total, approvals: total, run_ended: true, by_admin: true });
    const runEvents = (await h.t.ds.query(`SELECT metadata FROM runtime_ledger_events WHERE run_id = $1 AND type = 'run.cancelled'`, [org.runId])) as {
      metadata: unknown;
    }[];
    expect(runEvents.map((e) => e.metadata)).toEqual([{ reasonGiven: true, reasonDigest: createHash('sha256').update('runaway agent').digest('hex'), blockedCalls: total }]);
    expect(await h.t.ds.query('SELECT status, pending_approval_count FROM agent_runs WHERE id = $1', [org.runId])).toEqual([
      { status: 'cancelled', pending_approval_count: 0 },
    ]);
  }, 240_000);

  it('an approval held by someone else as the run ends does not hold the end up; a decision on it then is refused, and the call never runs', async () => {
    const { org, expert, toolCallId: callId, approval } = await waitingRefund(h, '4.00', ['shopify_refund.create', 'order_lookup.lookup']);
    const before = refunds(h);
    // Another transaction holds the approval's row (as a decision being written down does) while the run ends.
    await seeder.query('BEGIN');
    await seeder.query('SELECT 1 FROM approval_requests WHERE id = $1 FOR UPDATE', [approval.id]);
    let res;
    try {
      res = await Promise.race([
        h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.adminKey)).send({ reason: 'stop' }),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the end waited for the held approval')), 10_000)),
      ]);
    } finally {
      await seeder.query('ROLLBACK');
    }
    expect([res.status, res.body.status]).toEqual([200, 'cancelled']);
    expect((await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }))).status).toBe(409);
    // Pending a moment longer (its batch passed it over), it cannot be approved: the run ended.
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect([decided.status, decided.body.code]).toEqual([409, 'APPROVAL_ALREADY_DECIDED']);
    // A later pass rejects it as the end rejects every approval of the run.
    await until('the held approval rejected', async () => (await pendingOf(org.runId)) === 0, 30_000);
    expect(await h.t.ds.query('SELECT status, decision_reason FROM approval_requests WHERE id = $1', [approval.id])).toEqual([{ status: 'rejected', decision_reason: 'stop' }]);
    expect(await h.t.ds.query('SELECT status, error_code FROM tool_calls WHERE id = $1', [callId])).toEqual([{ status: 'blocked', error_code: 'RUN_NOT_ACTIVE' }]);
    const events = (await h.t.ds.query(`SELECT type, metadata FROM runtime_ledger_events WHERE tool_call_id = $1 AND type IN ('tool_call.blocked', 'tool_call.approved', 'tool_call.started') ORDER BY created_at`, [
      callId,
    ])) as { type: string; metadata: Record<string, unknown> }[];
    expect(events).toEqual([{ type: 'tool_call.blocked', metadata: expect.objectContaining({ errorCode: 'RUN_NOT_ACTIVE', reason: 'run_ended', approvalId: approval.id }) }]);
    await h.t.app.get(ApprovedCallRunner).sweep(); // nothing approved for it to start
    expect(refunds(h)).toBe(before);
  }, 120_000);
});
