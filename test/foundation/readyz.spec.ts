import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HealthController } from '../../src/health/health.controller.js';
import { DatabaseProbe } from '../../src/health/database-probe.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

/**
 * /readyz means "database reachable" (API.md §8), not "a request connection is
 * free": with every pooled connection in a slow but healthy statement it must
 * still answer 200, or a load spike takes every replica out of rotation at once.
 */
describe('/readyz', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ DB_POOL_SIZE: '2' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answers 200 while every connection of the request pool is busy', async () => {
    // Tagged, so only these two count: the database is shared with the other spec files of the run.
    const tag = `readyz-busy-${randomUUID()}`;
    const sleeping = `SELECT pg_sleep(5) /* ${tag} */`;
    const watcher = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await watcher.connect();
    /** How many of the two still hold a pooled connection in their statement, seen from outside the pool. */
    const busyNow = async (): Promise<number> =>
      Number(
        (
          await watcher.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query = $1`, [
            sleeping,
          ])
        ).rows[0].n,
      );
    const busy = [t.ds.query(sleeping), t.ds.query(sleeping)];
    try {
      await waitFor(async () => (await busyNow()) === 2, 'both pool connections in pg_sleep', 4_000);
      const t0 = performance.now();
      const res = await t.http.get('/readyz');
      const ms = performance.now() - t0;
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toEqual({ status: 'ready', database: 'up' });
      // Neither had let go of its connection when it answered: it did not wait for a pooled one.
      expect(await busyNow()).toBe(2);
      expect(ms).toBeLessThan(1_000);
    } finally {
      await Promise.all(busy);
      await watcher.end();
    }
  }, 20_000);

  /**
   * A failing probe says why on the 503's own line (databaseCode, databaseCause), as every DATABASE_UNAVAILABLE line
   * does: refused, DNS, a wrong database or password. Never the database URL's password, nor the server's message.
   */
  it("a failing probe's 503 line says why the database is down, without the URL's password", async () => {
    const health = t.app.get(HealthController);
    const original = health.probe;
    const password = `pw-${randomUUID()}`;
    const causes: Record<string, unknown>[] = [];
    for (const url of [`postgres://postgres:${password}@127.0.0.1:1/postgres`, `postgres://postgres@127.0.0.1:5432/no_such_db_${randomUUID().slice(0, 8)}`]) {
      const probe = new DatabaseProbe({ type: 'postgres', url } as never);
      (health as { probe: DatabaseProbe }).probe = probe;
      try {
        const from = t.logs.length;
        const res = await t.http.get('/readyz');
        expect([res.status, res.body.code, res.body.database]).toEqual([503, 'DATABASE_UNAVAILABLE', 'down']);
        await new Promise((r) => setTimeout(r, 100));
        const cid = res.headers['x-correlation-id'] as string;
        const logged = t.logs.slice(from).join('');
        expect(logged).not.toContain(password);
        const lines = logged
          .split('\n')
          .filter((l) => l.includes(cid))
          .map((l) => JSON.parse(l) as Record<string, unknown>);
        expect(lines.map((l) => [l.msg, l.code])).toEqual([['request errored', 'DATABASE_UNAVAILABLE']]);
        causes.push({ databaseCode: lines[0].databaseCode, databaseCause: lines[0].databaseCause });
      } finally {
        (health as { probe: DatabaseProbe }).probe = original;
        await probe.close().catch(() => undefined);
      }
    }
    expect(causes).toEqual([
      { databaseCode: 'ECONNREFUSED', databaseCause: 'connection refused' },
      { databaseCode: '3D000', databaseCause: 'no such database (DATABASE_URL)' },
    ]);
  });

  it('closes its own connection when the app shuts down', async () => {
    const other = await startTestApp();
    const probe = other.app.get(HealthController).probe;
    expect((await other.http.get('/readyz')).status).toBe(200);
    await other.close();
    await expect(probe.ping()).rejects.toThrow(/after calling end/);
  });
});
