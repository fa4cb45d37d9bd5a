/**
 * POST /v1/tool-calls/:id/reconcile when another change to the call commits
 * between the route's read and its conditional UPDATE (two operators at once):
 * the 409 names the status the call has now, not the `indeterminate` read first.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { insertCalls, insertRun } from './ledger-seed.js';

describe('reconcile: losing a race', () => {
  let t: TestApp;
  /** Another operator's reconcile, held open: it has updated the row and not committed yet. */
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
