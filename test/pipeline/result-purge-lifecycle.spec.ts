import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * The purge of expired full (unredacted) results across restarts and shutdowns. In a database of its own: a
 * start-up purge here must not touch other specs' results, nor theirs these.
 */
describe('results purge: at start-up, and stopped between batches by a shutdown', () => {
  let db: ScratchDatabase;
  let t: TestApp | undefined;
  beforeAll(async () => {
    db = await createScratchDatabase('tg_result_purge');
  });
  afterAll(async () => {
    try {
      await t?.close();
    } finally {
      await db?.drop();
    }
  });

  /** Stored results no call of this database made (the purge and the cap read only these columns). */
  const insertResults = (ds: TestApp['ds'], n: number, createdAgo: string, expiresIn: string) =>
    ds.query(
      `INSERT INTO tool_call_results (tool_call_id, org_id, key_id, iv, ciphertext, auth_tag, size_bytes, created_at, expires_at)
       SELECT gen_random_uuid(), gen_random_uuid(), 'k1', '\\x00'::bytea, '\\x00'::bytea, '\\x00'::bytea, 1,
              now() - $2::interval, now() + $3::interval
         FROM generate_series(1, $1::int)`,
      [n, createdAgo, expiresIn],
    );
  const count = async (ds: TestApp['ds'], where: string) =>
    ((await ds.query(`SELECT count(*)::int AS n FROM tool_call_results WHERE ${where}`)) as [{ n: number }])[0].n;

  it('a gateway purges results already past their retention at start-up, not one purge period (10 min) later', async () => {
    t = await startTestApp({ DATABASE_URL: db.url });
    await insertResults(t.ds, 3, '2 days', '-1 day'); // expired a day ago: the process before died before its pass
    await insertResults(t.ds, 2, '1 minute', '1 day'); // still kept
    await t.close();
    // A replica restarted more often than every 10 minutes (a deploy, a crash loop) never got to its first pass.
    t = await startTestApp({ DATABASE_URL: db.url });
    const deadline = Date.now() + 10_000;
    while ((await count(t.ds, 'expires_at <= now()')) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(await count(t.ds, 'expires_at <= now()'), 'expired results still stored after start-up').toBe(0);
    expect(await count(t.ds, 'expires_at > now()'), 'results within their retention kept').toBe(2);
    await t.close();
    t = undefined;
  }, 60_000);

  it('a shutdown during the start-up cap of a large backlog waits for the statement in flight, not the backlog; the next process goes on', async () => {
    t = await startTestApp({ DATABASE_URL: db.url });
    await t.ds.query('DELETE FROM tool_call_results');
    // Kept for 90 days, and the retention lowered to an hour (README "Configuration"): all are past the new one.
    await insertResults(t.ds, 100_000, '2 hours', '80 days');
    await t.close();
    t = await startTestApp({ DATABASE_URL: db.url, RESULT_TTL_SECONDS: '3600' });
    await t.close(); // what SIGTERM runs, while the cap works through 5,000 rows a statement
    t = undefined;
    const plain = new pg.Client({ connectionString: db.url });
    await plain.connect();
    try {
      const uncapped = async () => ((await plain.query(`SELECT count(*)::int AS n FROM tool_call_results WHERE expires_at > now() + interval '1 day'`)).rows as [{ n: number }])[0].n;
      expect(await uncapped(), 'the shutdown waited for the whole backlog to be capped').toBeGreaterThan(50_000);
      // The next process caps the rest at its start, then purges them all (written 2 hours ago, kept 1 hour).
      t = await startTestApp({ DATABASE_URL: db.url, RESULT_TTL_SECONDS: '3600' });
      const deadline = Date.now() + 60_000;
      const left = async () => ((await plain.query('SELECT count(*)::int AS n FROM tool_call_results')).rows as [{ n: number }])[0].n;
      while ((await left()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
      expect(await left(), 'the next process capped and purged the backlog').toBe(0);
    } finally {
      await plain.end();
    }
  }, 120_000);
});
