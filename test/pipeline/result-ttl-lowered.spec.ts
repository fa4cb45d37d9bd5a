import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { ResultsStore } from '../../src/tool-calls/results.store.js';
import { emulatorEnv, setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { dropScratchDatabase, scratchDatabaseUrl } from '../support/scratch-database.js';
import { bearer, startTestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

/**
 * RESULT_TTL_SECONDS is how long full results live (README). An operator who lowers it (say 90 days → 1 hour,
 * for the unredacted vendor data these results hold) shortens what is already stored too: a result written
 * under the longer retention lives the new one from its writing — unreadable at once, purged by the next pass —
 * while results written under the new setting keep theirs. In a database of its own: the shorter retention's
 * purge would cut the results of every other spec running on the shared one.
 */
describe('lowering RESULT_TTL_SECONDS applies to results already stored', () => {
  let h: Harness;
  let admin: pg.Client;
  const dbName = `tg_result_ttl_${process.pid}_${Date.now()}`;
  const db = { DATABASE_URL: scratchDatabaseUrl(dbName) };
  beforeAll(async () => {
    admin = new pg.Client({ connectionString: process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    h = await startHarness({ ...db, RESULT_TTL_SECONDS: String(90 * 86_400) });
  });
  afterAll(async () => {
    try {
      await h?.close(); // closes the restarted app (h.t) and the emulator
      if (admin) await dropScratchDatabase(admin, dbName); // leak-scanned first: the run-wide scan never sees it
    } finally {
      await admin?.end();
    }
  });

  it('a result stored under the old retention is unreadable once the new one has passed, and the purge removes it; a new result stays', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const post = () => h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    const result = async (id: string) => (await h.t.http.get(`/v1/tool-calls/${id}/result`).set(bearer(agentKey))).body as { status: string; result: unknown };
    const rows = async (id: string) =>
      ((await h.t.ds.query('SELECT count(*)::int AS n FROM tool_call_results WHERE tool_call_id = $1', [id])) as [{ n: number }])[0].n;

    const old = (await post()).body.toolCallId as string;
    await h.t.close(); // the operator restarts with the shorter retention
    h.t = await startTestApp({ ...emulatorEnv(h.emu.url), ...db, RESULT_TTL_SECONDS: '3600' });
    expect(await result(old)).toMatchObject({ status: 'succeeded', result: { orderId: '12345' } }); // within an hour of its writing
    // Its expiry brought to the new retention at start-up, not at the first purge: what reading it back costs
    // (result_bytes, by expires_at) agrees with what load() reads from the start.
    const capped = async () =>
      ((await h.t.ds.query(
        `SELECT abs(extract(epoch FROM expires_at - (created_at + interval '1 hour'))) < 1 AS capped FROM tool_call_results WHERE tool_call_id = $1`,
        [old],
      )) as [{ capped: boolean }])[0].capped;
    await waitFor(capped, 'the start-up pass to bring the old result to the new retention', 5_000, 20); // it runs behind start-up

    const clock = h.t.app.get(Clock);
    clock.advance(2 * 3600 * 1000); // two hours later: past the new retention, far inside the old one
    expect(await result(old)).toMatchObject({ status: 'succeeded', result: null }); // before any purge
    const fresh = (await post()).body.toolCallId as string;

    expect(await h.t.app.get(ResultsStore).purgeExpired(clock.now())).toBe(1);
    expect({ old: await rows(old), fresh: await rows(fresh) }).toEqual({ old: 0, fresh: 1 });
    expect(await result(fresh)).toMatchObject({ status: 'succeeded', result: { orderId: '12345' } });
    expect(await h.t.app.get(ResultsStore).purgeExpired(clock.now())).toBe(0);
  });
});
