/**
 * An outcome write that overlaps the orphan sweep's statement: the sweep has updated the row (locked, not committed)
 * when the outcome statement takes its snapshot. Its `tc` UPDATE waits, re-checks the row (now indeterminate) and
 * updates nothing, and its `swept` step read the row as running: the vendor's answer, or "not sent" and the charge
 * taken back, must still be recorded, as a moment after the sweep committed.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OrphanSweeperService } from '../../src/tool-calls/orphan-sweeper.service.js';
import { ToolCallLedger, type OutcomeRow } from '../../src/tool-calls/tool-call-ledger.js';
import { insertCalls, insertRun } from '../ops/ledger-seed.js';
import { createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

describe('a late outcome racing the orphan sweep\'s statement', () => {
  let t: TestApp;
  let other: pg.Client;
  beforeAll(async () => {
    t = await startTestApp();
    other = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await other.connect();
  });
  afterAll(async () => {
    await other?.end();
    await t?.close();
  });

  async function runningCall(org: string, run: string, ago: string, toolName = 'order_lookup', action = 'lookup') {
    const [c] = await insertCalls(t.ds, [{ orgId: org, runId: run, status: 'running', toolName, action }]);
    await t.ds.query(`UPDATE tool_calls SET started_at = now() - $2::interval, duration_ms = NULL, finished_at = NULL, cost_cents = 0 WHERE id = $1`, [c.id, ago]);
    return c.id;
  }

  const blockedBy = async (pid: number): Promise<number | undefined> =>
    ((await t.ds.query('SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid])) as { pid: number }[])[0]?.pid;

  it('the vendor answer that lands while the sweep statement is in flight is recorded as outcome_after_sweep', async () => {
    const org = await createOrg(t, 'recon sweep race');
    const run = await insertRun(t.ds, org);
    // A: the call whose outcome arrives; B: a younger orphan the sweep reaches after A.
    const a = await runningCall(org, run, '3 hours');
    const b = await runningCall(org, run, '2 hours');
    const otherPid = ((await other.query('SELECT pg_backend_pid() AS pid')).rows as { pid: number }[])[0].pid;

    await other.query('BEGIN');
    await other.query('SELECT 1 FROM tool_calls WHERE id = $1 FOR UPDATE', [b]);
    let sweep: Promise<number> | undefined;
    let write: Promise<boolean> | undefined;
    try {
      sweep = t.app.get(OrphanSweeperService).sweep();
      // The sweep has updated A (locked, uncommitted) and waits for B.
      const sweepPid = await waitFor(() => blockedBy(otherPid), 'the sweep to wait for B');
      const row: OutcomeRow = {
        id: a, orgId: org, from: 'running', status: 'succeeded', errorCode: null, errorText: null, httpStatus: 200,
        outputRedacted: { order: { id: '12345' } }, retryCount: 0, retryAfterSeconds: null, vendorStatus: 200, vendorRefused: null, durationMs: 120, costCents: 1, truncated: false,
      };
      write = t.app.get(ToolCallLedger).writeOutcome(row, [{
        orgId: org, type: 'tool_call.succeeded', runId: run, toolCallId: a,
        metadata: { toolName: 'order_lookup', action: 'lookup', digest: 'ab'.repeat(32), durationMs: 120, errorCode: null, vendorStatus: 200, retryCount: 0 },
      }]);
      await waitFor(() => blockedBy(sweepPid), 'the outcome write to wait for the sweep');
    } finally {
      await other.query('COMMIT');
    }
    expect(await sweep).toBeGreaterThanOrEqual(2);
    expect(await write).toBe(false); // settled elsewhere: right
    const [rowA] = (await t.ds.query('SELECT status FROM tool_calls WHERE id = $1', [a])) as { status: string }[];
    expect(rowA.status).toBe('indeterminate');
    const types = ((await t.ds.query('SELECT type FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq', [a])) as { type: string }[]).map((e) => e.type);
    // Expected: the vendor's answer is on the ledger for the reconcile (as when the sweep committed a moment earlier).
    expect(types).toEqual(['tool_call.indeterminate', 'tool_call.outcome_after_sweep']);
  });

  it('control: the same write a moment after the sweep committed does record it', async () => {
    const org = await createOrg(t, 'recon sweep control');
    const run = await insertRun(t.ds, org);
    const a = await runningCall(org, run, '3 hours');
    await t.app.get(OrphanSweeperService).sweep();
    const row: OutcomeRow = {
      id: a, orgId: org, from: 'running', status: 'succeeded', errorCode: null, errorText: null, httpStatus: 200,
      outputRedacted: { order: { id: '12345' } }, retryCount: 0, retryAfterSeconds: null, vendorStatus: 200, vendorRefused: null, durationMs: 120, costCents: 1, truncated: false,
    };
    expect(await t.app.get(ToolCallLedger).writeOutcome(row, [{
      orgId: org, type: 'tool_call.succeeded', runId: run, toolCallId: a,
      metadata: { toolName: 'order_lookup', action: 'lookup', digest: 'ab'.repeat(32), durationMs: 120, errorCode: null, vendorStatus: 200, retryCount: 0 },
    }])).toBe(false);
    const types = ((await t.ds.query('SELECT type FROM runtime_ledger_events WHERE tool_call_id = $1 ORDER BY seq', [a])) as { type: string }[]).map((e) => e.type);
    expect(types).toEqual(['tool_call.indeterminate', 'tool_call.outcome_after_sweep']);
  });
  it('an unsent settle (cost 0) that lands while the sweep statement is in flight takes the sweep\'s charge back, as it does a moment later', async () => {
    const org = await createOrg(t, 'recon sweep race unsent');
    const run = await insertRun(t.ds, org);
    const a = await runningCall(org, run, '3 hours', 'shopify_refund', 'create');
    const b = await runningCall(org, run, '2 hours');
    const otherPid = ((await other.query('SELECT pg_backend_pid() AS pid')).rows as { pid: number }[])[0].pid;
    await other.query('BEGIN');
    await other.query('SELECT 1 FROM tool_calls WHERE id = $1 FOR UPDATE', [b]);
    let sweep: Promise<number> | undefined;
    let write: Promise<boolean> | undefined;
    try {
      sweep = t.app.get(OrphanSweeperService).sweep();
      const sweepPid = await waitFor(() => blockedBy(otherPid), 'the sweep to wait for B');
      const row: OutcomeRow = {
        id: a, orgId: org, from: 'running', status: 'failed', errorCode: 'EXECUTION_ERROR', errorText: 'not sent', httpStatus: 200,
        outputRedacted: null, retryCount: 0, retryAfterSeconds: null, vendorStatus: null, vendorRefused: null, durationMs: 0, costCents: 0, truncated: false,
      };
      write = t.app.get(ToolCallLedger).writeOutcome(row, [{
        orgId: org, type: 'tool_call.failed', runId: run, toolCallId: a,
        metadata: { toolName: 'shopify_refund', action: 'create', digest: 'ab'.repeat(32), durationMs: 0, errorCode: 'EXECUTION_ERROR', vendorStatus: null, retryCount: 0 },
      }]);
      await waitFor(() => blockedBy(sweepPid), 'the outcome write to wait for the sweep');
    } finally {
      await other.query('COMMIT');
    }
    await sweep;
    expect(await write).toBe(false);
    const [rowA] = (await t.ds.query('SELECT status, cost_cents FROM tool_calls WHERE id = $1', [a])) as { status: string; cost_cents: number }[];
    // Expected as without the overlap: nothing reached the vendor, the sweep's guessed charge is taken back.
    expect(rowA).toEqual({ status: 'indeterminate', cost_cents: 0 });
  });
});
