import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { dbOptions } from '../../src/db/db-options.js';
import { statementTimeoutFor } from '../../src/db/session-settings.js';
import { startHarness, setupOrg, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * DB_QUERY_TIMEOUT_MS (1 000 – 600 000) is when the client stops waiting; the server's statement_timeout must
 * always come first. It was a fixed 15 s: below that, a statement slowed by a lock was abandoned by the gateway
 * (503) and then committed — for a tool call's intent, a `running` row nothing executes, which the orphan sweep
 * later calls indeterminate ("may have happened") though nothing was sent.
 */
describe('DB_QUERY_TIMEOUT_MS and the server-side statement_timeout', () => {
  let h: Harness | undefined;
  afterAll(async () => {
    await h?.close();
  });

  it('the server cancels first at every allowed setting (and 0, for migrations, stays 0)', () => {
    for (const queryTimeoutMs of [1_000, 1_001, 1_500, 2_000, 5_000, 15_000, 15_999, 16_000, 20_000, 600_000]) {
      const extra = dbOptions('postgres://x@h/db', 20, queryTimeoutMs).extra as { statement_timeout: number; query_timeout: number };
      expect(extra.query_timeout).toBe(queryTimeoutMs);
      expect(extra.statement_timeout, `DB_QUERY_TIMEOUT_MS=${queryTimeoutMs}`).toBeGreaterThan(0); // 0 would mean none at all
      expect(extra.statement_timeout, `DB_QUERY_TIMEOUT_MS=${queryTimeoutMs}`).toBeLessThan(queryTimeoutMs);
      expect(extra.statement_timeout).toBeLessThanOrEqual(15_000);
    }
    expect(statementTimeoutFor(20_000)).toBe(15_000); // the default is unchanged
    expect(statementTimeoutFor(5_000)).toBe(4_000);
    expect(statementTimeoutFor(0)).toBe(0);
  });

  it('with DB_QUERY_TIMEOUT_MS=2000, an intent write held by a lock fails (503) and is not committed behind the gateway\'s back', async () => {
    h = await startHarness({ DB_QUERY_TIMEOUT_MS: '2000' });
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    h.emu.reset();
    const locker = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM agent_runs WHERE id = $1 FOR UPDATE', [org.runId]); // e.g. a run being ended
      const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
      const pending = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use).then((r) => r);
      await new Promise((r) => setTimeout(r, 3_500)); // past both timeouts
      await locker.query('COMMIT'); // the lock goes: a statement the server had not cancelled would commit now
      const res = await pending;
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ code: 'DATABASE_UNAVAILABLE' });
      await new Promise((r) => setTimeout(r, 500));
      const rows = (await locker.query('SELECT status FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2', [org.runId, use.id])).rows;
      expect({ rows, sentToVendor: h.emu.requests.length }).toEqual({ rows: [], sentToVendor: 0 });
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
    }
  }, 60_000);
});
