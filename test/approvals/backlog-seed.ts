import pg from 'pg';
import type { DataSource } from 'typeorm';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import type { Harness } from '../support/scenario.js';

/**
 * `n` copies of a call waiting for approval (its tool_calls row, approval request and stored input), each with its
 * approval already past expiry: the backlog an expiry sweep meets after the replicas were down, or a burst's expiry.
 * Returns the copies' approval ids. Each copy is the template's row with a few columns replaced (jsonb_populate_record
 * over the row itself, called once a copy in a LATERAL: `(f(…)).*` calls f once per column, and rebuilding the whole
 * row as jsonb each time made 30,000 copies take a minute).
 */
export async function cloneWaitingCalls(ds: DataSource, templateId: string, n: number): Promise<string[]> {
  const rows = (await ds.query(
    `WITH g AS MATERIALIZED (SELECT gen_random_uuid() AS tc, gen_random_uuid() AS ap, i FROM generate_series(1, $2::int) i),
     tci AS (INSERT INTO tool_calls SELECT r.* FROM tool_calls t CROSS JOIN g CROSS JOIN LATERAL jsonb_populate_record(t, jsonb_build_object(
               'id', g.tc, 'idempotency_key', t.idempotency_key || '-' || g.i, 'tool_use_id', t.tool_use_id || '-' || g.i)) r
               WHERE t.id = $1),
     api AS (INSERT INTO approval_requests SELECT r.* FROM approval_requests a CROSS JOIN g CROSS JOIN LATERAL jsonb_populate_record(a, jsonb_build_object(
               'id', g.ap, 'tool_call_id', g.tc, 'expires_at', now() - interval '1 minute')) r
               WHERE a.tool_call_id = $1),
     ini AS (INSERT INTO tool_call_inputs SELECT r.* FROM tool_call_inputs x CROSS JOIN g CROSS JOIN LATERAL jsonb_populate_record(x, jsonb_build_object('tool_call_id', g.tc)) r
               WHERE x.tool_call_id = $1),
     ru AS (UPDATE agent_runs SET pending_approval_count = pending_approval_count + $2 WHERE id = (SELECT run_id FROM tool_calls WHERE id = $1))
     SELECT ap AS id FROM g`,
    [templateId, n],
  )) as { id: string }[];
  return rows.map((r) => r.id);
}

/** Stops the harness's approvals sweep: a spec that seeds a backlog runs the passes itself (ApprovedCallRunner.sweep). */
export async function stopSweep(h: Harness): Promise<void> {
  await (h.t.app.get(ApprovedCallRunner) as unknown as { task: { stop(): Promise<void> } }).task.stop();
}

/**
 * A connection of its own to seed large backlogs on (no statement timeout: the harness may run with a small one), and
 * the same as the DataSource-shaped `db` cloneWaitingCalls takes. The caller ends `client`.
 */
export async function seedingClient(): Promise<{ client: pg.Client; db: DataSource }> {
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  return { client, db: { query: async (sql: string, params: unknown[]) => (await client.query(sql, params)).rows } as unknown as DataSource };
}
