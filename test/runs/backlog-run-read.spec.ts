import type pg from 'pg';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXPIRY_BATCH } from '../../src/approvals/approval-settle.sql.js';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { cloneWaitingCalls, seedingClient, stopSweep } from '../approvals/backlog-seed.js';
import { refundUse } from '../approvals/support.js';
import { RunsService } from '../../src/runs/runs.service.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * A run read (GET /v1/runs/:runId, the agent's own view, and the first step of every complete/cancel) writes down the
 * run's overdue approvals before answering, as the ops reads do: EXPIRY_BATCH a statement for up to a second, the sweep
 * the rest (README). It used to send one statement per overdue approval, with no time limit (20,000 overdue: 20,000
 * statements and 40 s for one read). What it shows stays true either way: an approval past its expiry is not pending.
 * The sweep is stopped, so the backlog is the read's alone.
 */
describe('reading a run with a backlog of overdue approvals', () => {
  const BACKLOG = 5 * EXPIRY_BATCH;
  let h: Harness;
  let org: OrgSetup;
  let seeder: pg.Client;
  let db: DataSource;
  /** Two runs of the org, each with a refund waiting for approval (an hour to go) and BACKLOG copies of it overdue. */
  let runA: string;
  let runB: string;

  const overdue = async (runId: string): Promise<number> => {
    const [{ n }] = (await h.t.ds.query(`SELECT count(*)::int AS n FROM approval_requests WHERE run_id = $1 AND status = 'pending' AND expires_at <= now()`, [
      runId,
    ])) as [{ n: number }];
    return n;
  };
  async function seededRun(): Promise<string> {
    const run = await h.t.http.post('/v1/runs').set(bearer(org.agentKey)).send({ specialistId: 'support' });
    expect(run.status).toBe(201);
    const runId = run.body.id as string;
    const res = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('9.99'));
    expect(res.status).toBe(202);
    await cloneWaitingCalls(db, res.body.toolCallId as string, BACKLOG);
    return runId;
  }

  /** The statements `ds.query` sends while `work` runs (the settles among them). */
  async function counting<T>(work: () => Promise<T>): Promise<{ result: T; statements: number; settles: number }> {
    const query = h.t.ds.query.bind(h.t.ds);
    let statements = 0;
    let settles = 0;
    h.t.ds.query = ((sql: string, ...rest: unknown[]) => {
      statements++;
      if (/UPDATE approval_requests/.test(sql)) settles++;
      return (query as (...a: unknown[]) => Promise<unknown>)(sql, ...rest);
    }) as typeof h.t.ds.query;
    try {
      return { result: await work(), statements, settles };
    } finally {
      h.t.ds.query = query;
    }
  }

  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    await stopSweep(h);
    ({ client: seeder, db } = await seedingClient());
    runA = await seededRun();
    runB = await seededRun();
    await seeder.query('ANALYZE approval_requests; ANALYZE tool_calls');
  }, 120_000);
  afterAll(async () => {
    await seeder?.end();
    await h?.close();
  });

  it('overdue approvals a read has no time left to write down are shown expired all the same (not pending)', async () => {
    // As when the read's second ran out before the backlog did: nothing written down, the sweep's to settle.
    const runs = h.t.app.get(RunsService) as unknown as { expireOverdueOfRun: (runId: string, now: Date) => Promise<{ settled: string[]; more: boolean }> };
    const own = Object.getOwnPropertyDescriptor(runs, 'expireOverdueOfRun');
    runs.expireOverdueOfRun = () => Promise.resolve({ settled: [], more: true });
    try {
      const res = await h.t.http.get(`/v1/runs/${runA}`).set(bearer(org.agentKey));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'waiting_approval', pendingApprovalCount: 1 });
    } finally {
      if (own) Object.defineProperty(runs, 'expireOverdueOfRun', own);
      else delete (runs as { expireOverdueOfRun?: unknown }).expireOverdueOfRun;
    }
    expect(await overdue(runA)).toBe(BACKLOG);
  }, 60_000);

  it('the run read settles the backlog in batches (a few statements, not one per approval) and shows only the approval still pending', async () => {
    const { result: res, statements, settles } = await counting(() => h.t.http.get(`/v1/runs/${runB}`).set(bearer(org.agentKey)));
    expect(res.status).toBe(200);
    // Settled or not yet (past the read's second), the overdue ones are not shown pending: only the template's is.
    expect(res.body).toMatchObject({ status: 'waiting_approval', pendingApprovalCount: 1 });
    expect(settles).toBeLessThanOrEqual(BACKLOG / EXPIRY_BATCH + 1);
    expect(statements).toBeLessThan(100); // authentication and the run's own reads included; one per approval was over 5,000
    const left = await overdue(runB);
    expect((BACKLOG - left) % EXPIRY_BATCH).toBe(0); // whole batches
    expect(left).toBeLessThan(BACKLOG);
  }, 120_000);

  it('a read after the backlog is settled sends one settle statement, and shows the same', async () => {
    await h.t.app.get(ApprovedCallRunner).sweep(); // whatever the read left
    expect(await overdue(runB)).toBe(0);
    const { result: res, settles } = await counting(() => h.t.http.get(`/v1/runs/${runB}`).set(bearer(org.agentKey)));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'waiting_approval', pendingApprovalCount: 1 });
    expect(settles).toBeLessThanOrEqual(1);
    const [{ n }] = (await h.t.ds.query(`SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1 AND error_code = 'APPROVAL_EXPIRED'`, [runB])) as [
      { n: number },
    ];
    expect(n).toBe(BACKLOG);
  }, 120_000);
});
