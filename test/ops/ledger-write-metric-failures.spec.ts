/**
 * ledger_write_duration_seconds was observed only after a statement succeeded: an intent statement that waited on a
 * lock until statement_timeout cancelled it (57014, the runbook's first cause of "503 DATABASE_UNAVAILABLE while
 * /readyz says ready") was never observed. During exactly that incident the histogram showed nothing slow (and fewer
 * writes), so a latency alert on it could not fire. Failed writes are now observed with result="error" (found by a
 * reviewer of what the metrics say).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

const series = (text: string, labels: string): { count: number; sum: number } => {
  const value = (name: string) => Number(text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`))?.split(' ').pop() ?? 0);
  return { count: value('ledger_write_duration_seconds_count'), sum: value('ledger_write_duration_seconds_sum') };
};

describe('an intent write that timed out', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ DB_QUERY_TIMEOUT_MS: '1500' }); // statement_timeout ≈ 1 s
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is observed in ledger_write_duration_seconds{kind="intent",result="error"}, with the seconds it waited', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const before = series((await h.t.http.get('/metrics')).text, 'kind="intent",result="error"');
    // A manual session (or a long transaction) holds the run's row: the intent's FOR KEY SHARE waits for it.
    const holder = new pg.Client({ connectionString: (h.t.ds.options as { url: string }).url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SET LOCAL statement_timeout = 0; SET LOCAL idle_in_transaction_session_timeout = 0");
      await holder.query('SELECT 1 FROM agent_runs WHERE id = $1 FOR UPDATE', [org.runId]);
      const started = Date.now();
      const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '450789469' }));
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('DATABASE_UNAVAILABLE');
      expect(Date.now() - started).toBeGreaterThan(2_000); // the intent statements spent seconds waiting
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
    const text = (await h.t.http.get('/metrics')).text;
    const after = series(text, 'kind="intent",result="error"');
    // Before: unchanged — seconds of failed intent writes left no sample.
    expect(after.count).toBeGreaterThan(before.count);
    expect(after.sum - before.sum).toBeGreaterThan(0.5); // each cancelled statement waited about its timeout
  });
});
