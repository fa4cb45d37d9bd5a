import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settleApprovalsSql } from '../../src/approvals/approval-settle.sql.js';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { Sql } from '../../src/db/sql.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { cloneWaitingCalls } from './backlog-seed.js';
import { aroundStatements, refundUse, twoOverdueApprovals } from './support.js';

/** The sweep's expiry statement (settleApprovalsSql('expired', …)). */
const isSweepExpiry = (text: string): boolean => text.includes('UPDATE approval_requests SET') && text.includes('$1::uuid IS NULL');

/**
 * The approvals sweep settles a backlog of overdue approvals a batch per statement (each its own transaction),
 * as many as it takes: one statement over a large backlog could outlast the statement timeout on every pass and
 * never catch up. And the expiry failing does not keep the approved calls from being started.
 * A batch of 10 here stands for the 1,000 of production; the statement timeout is 1 s (DB_QUERY_TIMEOUT_MS 2000).
 */
describe('approvals sweep over a backlog of overdue approvals', () => {
  const BATCH = 10;
  let h: Harness;
  let org: OrgSetup;
  let runner: ApprovedCallRunner;
  let other: pg.Client;

  const statusOf = async (table: 'approval_requests' | 'tool_calls', ids: string[]) =>
    ((await h.t.ds.query(`SELECT status, count(*)::int AS n FROM ${table} WHERE id = ANY($1::uuid[]) GROUP BY status ORDER BY status`, [ids])) as {
      status: string;
      n: number;
    }[]).map((r) => `${r.status}:${r.n}`);

  /** A call waiting for approval (not overdue: the TTL is an hour), `n` overdue copies of it, and their approval ids. */
  async function backlog(n: number, amount: string): Promise<{ approvals: string[]; calls: string[] }> {
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(amount));
    expect(res.status).toBe(202);
    const approvals = await cloneWaitingCalls(h.t.ds, res.body.toolCallId as string, n);
    const calls = ((await h.t.ds.query('SELECT tool_call_id FROM approval_requests WHERE id = ANY($1::uuid[])', [approvals])) as { tool_call_id: string }[]).map(
      (r) => r.tool_call_id,
    );
    return { approvals, calls };
  }

  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600', DB_QUERY_TIMEOUT_MS: '2000' });
    org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    runner = h.t.app.get(ApprovedCallRunner);
    // The periodic pass would settle the backlog as it lands: stopped, so the passes here are the test's own.
    await (runner as unknown as { task: { stop(): Promise<void> } }).task.stop();
    other = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await other.connect();
  });
  afterAll(async () => {
    await other?.end();
    await h?.close();
  });

  it('settles a backlog larger than a batch in several statements, none larger than a batch', async () => {
    const { approvals, calls } = await backlog(25, '1.11');
    const batches: number[] = [];
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      const rows = await send();
      if (isSweepExpiry(text)) batches.push(rows.length);
      return rows;
    });
    let result: { expired: number; started: number };
    try {
      result = await runner.sweep(BATCH);
    } finally {
      undo();
    }
    expect(await statusOf('approval_requests', approvals)).toEqual(['expired:25']);
    expect(await statusOf('tool_calls', calls)).toEqual(['blocked:25']);
    // At least three statements (25 of ours, maybe others' left in the shared database), each at most a batch,
    // the last one short; together they are what the pass reports.
    expect(batches.length).toBeGreaterThanOrEqual(3);
    expect(Math.max(...batches)).toBeLessThanOrEqual(BATCH);
    expect(batches.at(-1)).toBeLessThan(BATCH);
    expect(batches.slice(0, -1).every((n) => n === BATCH)).toBe(true);
    expect(result.expired).toBe(batches.reduce((a, b) => a + b, 0));
  });

  it('still starts the approved calls when the expiry fails, and keeps the batches committed before the failure', async () => {
    const { approvals } = await backlog(25, '2.22');
    // One call approved and not started (as a restart or a full concurrency slot leaves it): the sweep's to run.
    const approved = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('3.33'));
    expect(approved.status).toBe(202);
    const approvedId = approved.body.toolCallId as string;
    await h.t.ds.query(
      `WITH a AS (UPDATE approval_requests SET status = 'approved', decided_at = now(), decided_role = 'admin' WHERE tool_call_id = $1 AND status = 'pending' RETURNING run_id),
            r AS (UPDATE agent_runs SET pending_approval_count = pending_approval_count - 1 WHERE id IN (SELECT run_id FROM a))
       UPDATE tool_calls SET status = 'approved', updated_at = now() WHERE id = $1`,
      [approvedId],
    );
    // The highest-id approval of the backlog (all expired at the same moment: the sweep reaches it last) is held by
    // another transaction: the batch that reaches it waits for it past the statement timeout (1 s) and fails; those
    // before it (24 rows before it: at least two full batches) are committed.
    const held = [...approvals].sort().at(-1)!;
    await other.query('BEGIN');
    let result: { expired: number; started: number };
    try {
      await other.query('SELECT 1 FROM approval_requests WHERE id = $1 FOR UPDATE', [held]);
      result = await runner.sweep(BATCH);
    } finally {
      await other.query('ROLLBACK');
    }
    const [call] = (await h.t.ds.query('SELECT status FROM tool_calls WHERE id = $1', [approvedId])) as { status: string }[];
    expect(call.status).toBe('succeeded');
    expect(result.started).toBeGreaterThanOrEqual(1);
    expect(result.expired).toBeGreaterThanOrEqual(2 * BATCH);
    const [{ status: heldStatus }] = (await h.t.ds.query('SELECT status FROM approval_requests WHERE id = $1', [held])) as { status: string }[];
    expect(heldStatus).toBe('pending');
    // The next pass goes on where this one stopped.
    await runner.sweep(BATCH);
    expect(await statusOf('approval_requests', approvals)).toEqual(['expired:25']);
  });

  // As decision-deadlock.spec.ts checks of the unbatched statement: a batch is picked by expiry, but locked in id order.
  it('locks the approvals of a batch in id order, as a run end does', async () => {
    // Only these two overdue at the `now` the statement is given; `hi` expires first, so the batch reads it first.
    const { lo, hi } = await twoOverdueApprovals(h, org, ['4.40', '4.41']);
    const end = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await end.connect();
    try {
      await end.query('BEGIN');
      // The run end's first lock (it goes on with `hi`); the batch starts while it is held.
      await end.query('SELECT id FROM approval_requests WHERE id = $1 FOR UPDATE', [lo]);
      const [{ pid }] = (await end.query('SELECT pg_backend_pid() AS pid')).rows as { pid: number }[];
      const sweep = h.t.ds.query(settleApprovalsSql('expired', { batched: true }), [null, 'expired', new Date('2000-01-01T00:00:20Z'), null, null, null, BATCH]) as Promise<
        { id: string }[]
      >;
      const waiting = async () =>
        ((await h.t.ds.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, [pid])) as { n: number }[])[0].n;
      for (let i = 0; i < 100 && (await waiting()) === 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(await waiting()).toBe(1); // the batch waits for `lo`
      // Not yet holding `hi`: the run end takes it (had the batch taken it first, each would wait for the other).
      expect((await end.query('SELECT id FROM approval_requests WHERE id = $1 FOR UPDATE NOWAIT', [hi])).rows).toEqual([{ id: hi }]);
      await end.query('COMMIT');
      expect((await sweep).map((r) => r.id).sort()).toEqual([lo, hi]);
    } finally {
      await end.query('ROLLBACK').catch(() => undefined);
      await end.end();
    }
  });
});
