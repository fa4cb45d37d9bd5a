/**
 * POST /v1/tool-calls/:id/reconcile when another change to the call commits
 * between the route's read and its conditional UPDATE (two operators at once):
 * the 409 names the status the call has now, not the `indeterminate` read first.
 * And a swept call's late vendor answer (writeOutcomeRow) overlapping a reconcile
 * that commits while it waits: the answer is judged against the reconciled row.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORPHANED_TEXT } from '../../src/tool-calls/orphan-sweeper.service.js';
import { ReconcileService } from '../../src/tool-calls/reconcile.service.js';
import { ResultsStore } from '../../src/tool-calls/results.store.js';
import { ToolCallLedger, type OutcomeRow } from '../../src/tool-calls/tool-call-ledger.js';
import type { NewLedgerEvent } from '../../src/ledger/ledger-events.service.js';
import { bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { insertCalls, insertRun } from './ledger-seed.js';

let t: TestApp;
/** Another operator's reconcile, or the acting key's row, held open. */
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

describe('reconcile: losing a race', () => {
  it('the loser is told the state the winner left (409, "this one is succeeded"), and writes nothing', async () => {
    const org = await createOrg(t, 'reconcile race');
    const ops = (await createKey(t, org, 'ops')).key;
    const run = await insertRun(t.ds, org);
    const [call] = await insertCalls(t.ds, [{ orgId: org, runId: run, status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' }]);
    const otherPid = ((await other.query('SELECT pg_backend_pid() AS pid')).rows as { pid: number }[])[0].pid;

    await other.query('BEGIN');
    await other.query(`UPDATE tool_calls SET status = 'succeeded', error_code = NULL, note = 'seen at vendor', updated_at = now() WHERE id = $1`, [call.id]);
    let settled = false;
    const loser = t.http.post(`/v1/tool-calls/${call.id}/reconcile`).set(bearer(ops)).send({ status: 'failed', note: 'not at vendor' })
      .then((res) => ((settled = true), res));
    try {
      // Its read saw `indeterminate` (the other change is not committed); its UPDATE now waits for the row.
      await waitFor(
        async () => ((await t.ds.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [otherPid])) as { n: number }[])[0].n > 0,
        'the reconcile UPDATE to wait for the other change',
      );
      expect(settled).toBe(false);
    } finally {
      await other.query('COMMIT');
    }
    const res = await loser;
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ code: 'NOT_RECONCILABLE', detail: 'only an indeterminate call can be reconciled (this one is succeeded)' });
    const [row] = (await t.ds.query('SELECT status, note FROM tool_calls WHERE id = $1', [call.id])) as { status: string; note: string }[];
    expect(row).toEqual({ status: 'succeeded', note: 'seen at vendor' });
    const [{ n }] = (await t.ds.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE tool_call_id = $1 AND type = 'tool_call.reconciled'`, [call.id])) as { n: number }[];
    expect(n).toBe(0);
  });
});

describe('reconcile: a swept call\'s late vendor answer landing while the reconcile commits', () => {
  /** A refund call as the orphan sweep leaves it: indeterminate, orphaned text, no duration, charged 5. */
  async function sweptCall(org: string, run: string): Promise<string> {
    const [c] = await insertCalls(t.ds, [{ orgId: org, runId: run, status: 'running', toolName: 'shopify_refund', action: 'create' }]);
    await t.ds.query(
      `UPDATE tool_calls SET status = 'indeterminate', error_code = 'OUTCOME_UNKNOWN', error_text = $2, http_status = 200,
              started_at = now() - interval '3 hours', finished_at = now(), duration_ms = NULL, note = NULL, cost_cents = 5
        WHERE id = $1`,
      [c.id, ORPHANED_TEXT],
    );
    return c.id;
  }
  /** "Not sent" (cost 0, recordUnsent): takes the sweep's charge back from a call still as the sweep left it. */
  const unsent = (id: string, org: string): OutcomeRow => ({
    id, orgId: org, from: 'running', status: 'failed', errorCode: 'EXECUTION_ERROR', errorText: 'not sent', httpStatus: 200,
    outputRedacted: null, retryCount: 0, retryAfterSeconds: null, vendorStatus: null, vendorRefused: null, durationMs: 0, costCents: 0, truncated: false,
  });
  const unsentEvents = (org: string, run: string, id: string): NewLedgerEvent[] => [{
    orgId: org, type: 'tool_call.failed', runId: run, toolCallId: id,
    metadata: { toolName: 'shopify_refund', action: 'create', digest: 'ab'.repeat(32), durationMs: 0, errorCode: 'EXECUTION_ERROR', vendorStatus: null, retryCount: 0 },
  }];
  /** The vendor's answer: refunded, with a result to keep. */
  const answered = (id: string, org: string): OutcomeRow => ({
    id, orgId: org, from: 'running', status: 'succeeded', errorCode: null, errorText: null, httpStatus: 200,
    outputRedacted: { refund: { id: '1' } }, retryCount: 0, retryAfterSeconds: null, vendorStatus: 200, vendorRefused: null, durationMs: 120, costCents: 5, truncated: false,
    result: t.app.get(ResultsStore).seal(org, id, JSON.stringify({ refund: { id: '1', customer: 'someone' } }), new Date()),
  });
  const answeredEvents = (org: string, run: string, id: string): NewLedgerEvent[] => [{
    orgId: org, type: 'tool_call.succeeded', runId: run, toolCallId: id,
    metadata: { toolName: 'shopify_refund', action: 'create', digest: 'ab'.repeat(32), durationMs: 120, errorCode: null, vendorStatus: 200, retryCount: 0 },
  }];
  const blockedBy = async (pid: number): Promise<number | undefined> =>
    ((await t.ds.query('SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid])) as { pid: number }[])[0]?.pid;
  const callRow = async (id: string) => ((await t.ds.query('SELECT status, note, cost_cents FROM tool_calls WHERE id = $1', [id])) as object[])[0];
  const keptResults = async (id: string) => ((await t.ds.query('SELECT 1 FROM tool_call_results WHERE tool_call_id = $1', [id])) as unknown[]).length;
  const lateEvents = async (id: string) =>
    ((await t.ds.query(`SELECT metadata->'reconciled' AS reconciled FROM runtime_ledger_events WHERE tool_call_id = $1 AND type = 'tool_call.outcome_after_sweep'`, [id])) as object[]);

  /**
   * The reconcile has updated the call and waits in holdActorKey (a second connection holds the acting key's row);
   * `write` starts then, its snapshot not seeing the reconcile; once it is waiting (or done), the reconcile commits.
   */
  async function overlapping(org: string, opsKeyId: string, id: string, status: 'succeeded' | 'failed', note: string, write: () => Promise<boolean>): Promise<boolean> {
    const otherPid = ((await other.query('SELECT pg_backend_pid() AS pid')).rows as { pid: number }[])[0].pid;
    await other.query('BEGIN');
    await other.query('SELECT 1 FROM api_keys WHERE id = $1 FOR UPDATE', [opsKeyId]);
    let reconcile: Promise<unknown> | undefined;
    let written: Promise<boolean> | undefined;
    try {
      reconcile = t.app.get(ReconcileService).reconcile({ keyId: opsKeyId, orgId: org, role: 'ops' }, id, { status, note });
      const reconcilePid = await waitFor(() => blockedBy(otherPid), 'the reconcile to wait in holdActorKey');
      let done = false;
      written = write().finally(() => (done = true));
      await waitFor(async () => done || (await blockedBy(reconcilePid)) !== undefined, 'the late write to wait for the reconcile (or finish)');
    } finally {
      await other.query('COMMIT');
    }
    await reconcile;
    return await written!;
  }

  it('control: "not sent" after a reconcile as succeeded committed keeps the reconciled call\'s charge', async () => {
    const org = await createOrg(t, 'late answer reconcile control 1');
    const run = await insertRun(t.ds, org);
    const ops = await createKey(t, org, 'ops');
    const a = await sweptCall(org, run);
    await t.app.get(ReconcileService).reconcile({ keyId: ops.id, orgId: org, role: 'ops' }, a, { status: 'succeeded', note: 'refund seen at Shopify' });
    expect(await t.app.get(ToolCallLedger).writeOutcome(unsent(a, org), unsentEvents(org, run, a))).toBe(false);
    expect(await callRow(a)).toEqual({ status: 'succeeded', note: 'refund seen at Shopify', cost_cents: 5 });
    expect(await lateEvents(a)).toEqual([{ reconciled: true }]);
  });

  it('control: "not sent" on a call still as the sweep left it takes the sweep\'s charge back', async () => {
    const org = await createOrg(t, 'late answer reconcile control 2');
    const run = await insertRun(t.ds, org);
    const a = await sweptCall(org, run);
    expect(await t.app.get(ToolCallLedger).writeOutcome(unsent(a, org), unsentEvents(org, run, a))).toBe(false);
    expect(await callRow(a)).toEqual({ status: 'indeterminate', note: null, cost_cents: 0 });
    expect(await lateEvents(a)).toEqual([{ reconciled: false }]);
  });

  it('"not sent" overlapping a reconcile as succeeded does not zero the reconciled call\'s cost', async () => {
    const org = await createOrg(t, 'late answer reconcile race 1');
    const run = await insertRun(t.ds, org);
    const ops = await createKey(t, org, 'ops');
    const a = await sweptCall(org, run);
    const ledger = t.app.get(ToolCallLedger);
    expect(await overlapping(org, ops.id, a, 'succeeded', 'refund seen at Shopify', () => ledger.writeOutcome(unsent(a, org), unsentEvents(org, run, a)))).toBe(false);
    // As in the control: the charge is taken back only from a call ops have not reconciled.
    expect(await callRow(a)).toEqual({ status: 'succeeded', note: 'refund seen at Shopify', cost_cents: 5 });
    expect(await lateEvents(a)).toEqual([{ reconciled: true }]);
  });

  it('control: a late answer after a reconcile as failed committed keeps no result; after one as succeeded it does', async () => {
    const org = await createOrg(t, 'late answer reconcile control 3');
    const run = await insertRun(t.ds, org);
    const ops = await createKey(t, org, 'ops');
    const [a, b] = [await sweptCall(org, run), await sweptCall(org, run)];
    const ledger = t.app.get(ToolCallLedger);
    await t.app.get(ReconcileService).reconcile({ keyId: ops.id, orgId: org, role: 'ops' }, a, { status: 'failed', note: 'no refund at Shopify' });
    await t.app.get(ReconcileService).reconcile({ keyId: ops.id, orgId: org, role: 'ops' }, b, { status: 'succeeded', note: 'refund seen at Shopify' });
    expect(await ledger.writeOutcome(answered(a, org), answeredEvents(org, run, a))).toBe(false);
    expect(await ledger.writeOutcome(answered(b, org), answeredEvents(org, run, b))).toBe(false);
    expect(await keptResults(a)).toBe(0);
    expect(await keptResults(b)).toBe(1);
  });

  it('a late answer overlapping a reconcile as failed leaves no vendor result stored', async () => {
    const org = await createOrg(t, 'late answer reconcile race 2');
    const run = await insertRun(t.ds, org);
    const ops = await createKey(t, org, 'ops');
    const a = await sweptCall(org, run);
    const ledger = t.app.get(ToolCallLedger);
    expect(await overlapping(org, ops.id, a, 'failed', 'no refund at Shopify', () => ledger.writeOutcome(answered(a, org), answeredEvents(org, run, a)))).toBe(false);
    expect(await callRow(a)).toMatchObject({ status: 'failed', note: 'no refund at Shopify' });
    // reconcile.service.ts: "A late answer's result is kept for a reconcile as succeeded to hand out; failed, no one can ever read it."
    expect(await keptResults(a)).toBe(0);
    expect(await lateEvents(a)).toEqual([{ reconciled: true }]);
  });
});
