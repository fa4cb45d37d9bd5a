import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { OrphanSweeperService, SWEEP_LOGGED_IDS } from '../../src/tool-calls/orphan-sweeper.service.js';
import { aroundStatements } from '../approvals/support.js';
import { insertCalls, insertRun } from '../ops/ledger-seed.js';
import { createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/** The orphan sweep's statement. */
const isOrphanSweep = (text: string): boolean => text.includes("SET status = 'indeterminate'") && text.includes("'orphaned'");

/**
 * The orphan sweep settles a backlog of orphaned running calls a batch per statement (each its own transaction),
 * as many as it takes: one statement over a large backlog could outlast the statement timeout on every pass and
 * never catch up. A batch of 10 here stands for the 1,000 of production.
 */
describe('orphan sweep over a backlog of orphaned calls', () => {
  const BATCH = 10;
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('marks a backlog larger than a batch indeterminate in several statements, none larger than a batch', async () => {
    const org = await createOrg(t, 'orphan backlog');
    const run = await insertRun(t.ds, org);
    const seeded = await insertCalls(t.ds, Array.from({ length: 25 }, () => ({ orgId: org, runId: run, status: 'running' })));
    const ids = seeded.map((c) => c.id);
    // Orphaned: started long before the vendor timeout plus the margin. One more, started just now, is not.
    // Each a minute older than the one before it: the sweep's log names the longest-running first.
    await t.ds.query(
      `UPDATE tool_calls SET started_at = now() - interval '3 hours' - make_interval(mins => array_position($1::uuid[], id)), finished_at = NULL, duration_ms = NULL
        WHERE id = ANY($1::uuid[])`,
      [ids],
    );
    const [young] = await insertCalls(t.ds, [{ orgId: org, runId: run, status: 'running' }]);
    await t.ds.query('UPDATE tool_calls SET started_at = now(), finished_at = NULL, duration_ms = NULL WHERE id = $1', [young.id]);

    const batches: number[] = [];
    const undo = aroundStatements(t.app.get(Sql), async (text, _params, send) => {
      const rows = await send();
      if (isOrphanSweep(text)) batches.push((rows as { n: number }[])[0].n);
      return rows;
    });
    const logsFrom = t.logs.length;
    let swept: number;
    try {
      swept = await t.app.get(OrphanSweeperService).sweep(BATCH);
    } finally {
      undo();
    }
    const statuses = (await t.ds.query('SELECT status, error_code, count(*)::int AS n FROM tool_calls WHERE id = ANY($1::uuid[]) GROUP BY 1, 2', [ids])) as unknown[];
    expect(statuses).toEqual([{ status: 'indeterminate', error_code: 'OUTCOME_UNKNOWN', n: 25 }]);
    const [{ n: events }] = (await t.ds.query(
      `SELECT count(*)::int AS n FROM runtime_ledger_events WHERE tool_call_id = ANY($1::uuid[]) AND type = 'tool_call.indeterminate'`,
      [ids],
    )) as { n: number }[];
    expect(events).toBe(25);
    const [{ status: youngStatus }] = (await t.ds.query('SELECT status FROM tool_calls WHERE id = $1', [young.id])) as { status: string }[];
    expect(youngStatus).toBe('running');
    // At least three statements (25 of ours, maybe others' left in the shared database), each at most a batch,
    // the last one short; together they are what the pass reports.
    expect(batches.length).toBeGreaterThanOrEqual(3);
    expect(Math.max(...batches)).toBeLessThanOrEqual(BATCH);
    expect(batches.at(-1)).toBeLessThan(BATCH);
    expect(batches.slice(0, -1).every((n) => n === BATCH)).toBe(true);
    expect(swept).toBe(batches.reduce((a, b) => a + b, 0));
    // One warn line for the pass: on-call gets the count, and the first ids to reconcile, whatever the batching.
    const lines = t.logs
      .slice(logsFrom)
      .flatMap((chunk) => chunk.split('\n'))
      .filter((text) => text.includes('orphaned running tool calls marked indeterminate'))
      .map((text) => JSON.parse(text) as { level: number; count: number; toolCallIds: string[] });
    expect(lines).toHaveLength(1);
    expect(lines[0].level).toBe(40);
    expect(lines[0].count).toBe(swept);
    expect(lines[0].toolCallIds).toHaveLength(Math.min(SWEEP_LOGGED_IDS, swept));
    expect(new Set(lines[0].toolCallIds).size).toBe(lines[0].toolCallIds.length);
    // Every id named is a call this pass settled (ours, or another spec's orphan in the shared database).
    const named = (await t.ds.query(`SELECT count(*)::int AS n FROM tool_calls WHERE id = ANY($1::uuid[]) AND status = 'indeterminate' AND error_text = $2`, [
      lines[0].toolCallIds,
      'the process running this call stopped before recording its outcome',
    ])) as { n: number }[];
    expect(named[0].n).toBe(lines[0].toolCallIds.length);
    const oldestFirst = [...ids].reverse();
    const oursNamed = lines[0].toolCallIds.filter((id) => ids.includes(id));
    expect(oursNamed.length).toBeGreaterThan(0);
    expect(oursNamed).toEqual(oldestFirst.slice(0, oursNamed.length));
  });
});
