import type pg from 'pg';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { RunsService } from '../../src/runs/runs.service.js';
import { cloneWaitingCalls, seedingClient, stopSweep } from '../approvals/backlog-seed.js';
import { refundUse } from '../approvals/support.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

/**
 * A run read settles overdue approvals for at most a second and shows the ones it did not reach as no longer pending
 * (README: reads show an approval expired from the moment it passes). Ending the run then rejects the approvals still
 * pending in batches — but not the overdue ones: they expired before anyone rejected them, and the expiry sweep
 * settles them as such (expired, the call blocked APPROVAL_EXPIRED), not as the ender's rejection.
 */
describe('ending a run whose overdue approvals its read did not reach', () => {
  let h: Harness;
  let seeder: pg.Client;
  let db: DataSource;

  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    // The periodic sweep stopped: this spec runs its passes itself.
    await stopSweep(h);
    ({ client: seeder, db } = await seedingClient());
  }, 60_000);
  afterAll(async () => {
    await seeder?.end();
    await h?.close();
  });

  it('the overdue ones end expired (APPROVAL_EXPIRED, decided by nobody), the one still in time rejected by the end (RUN_NOT_ACTIVE)', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const first = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('9.99'));
    expect(first.status).toBe(202);
    const overdue = await cloneWaitingCalls(db, first.body.toolCallId as string, 3); // each a minute past its expiry
    // The read's second runs out before the backlog does (a large one; simulated: it settles nothing).
    const runs = h.t.app.get(RunsService) as unknown as { expireOverdueOfRun: (runId: string, now: Date) => Promise<{ settled: string[]; more: boolean }> };
    runs.expireOverdueOfRun = () => Promise.resolve({ settled: [], more: true });
    try {
      const shown = await h.t.http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey));
      expect(shown.body).toMatchObject({ status: 'waiting_approval', pendingApprovalCount: 1 }); // the overdue ones not counted
      const cancelled = await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.adminKey)).send({ reason: 'stop' });
      expect([cancelled.status, cancelled.body.status]).toEqual([200, 'cancelled']);
    } finally {
      delete (runs as { expireOverdueOfRun?: unknown }).expireOverdueOfRun; // the prototype's again
    }
    await h.t.app.get(ApprovedCallRunner).sweep(); // the expiry sweep's pass
    const story = async (approvalId: string) => {
      const a = (await h.t.http.get(`/v1/approvals/${approvalId}`).set(bearer(expert.key))).body as Record<string, unknown>;
      return { status: a.status, decidedBy: a.decidedBy, call: [a.toolCallStatus, a.toolCallErrorCode] };
    };
    for (const id of overdue) expect(await story(id)).toEqual({ status: 'expired', decidedBy: null, call: ['blocked', 'APPROVAL_EXPIRED'] });
    const [{ id: inTime }] = (await h.t.ds.query('SELECT id FROM approval_requests WHERE tool_call_id = $1', [first.body.toolCallId])) as { id: string }[];
    expect(await story(inTime)).toMatchObject({ status: 'rejected', call: ['blocked', 'RUN_NOT_ACTIVE'] });
    const [{ n }] = (await h.t.ds.query(`SELECT count(*)::int AS n FROM approval_requests WHERE run_id = $1 AND status = 'pending'`, [org.runId])) as { n: number }[];
    expect(n).toBe(0);
  }, 120_000);
});
