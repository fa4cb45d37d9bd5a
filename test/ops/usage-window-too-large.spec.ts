import pg, { type PoolClient } from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { insertCalls, insertRun } from './ledger-seed.js';

type Transaction = <T>(fn: (client: PoolClient) => Promise<T>) => Promise<T>;
const isUsage = (text: string): boolean => text.includes('GROUP BY tool_name, action');

/**
 * GET /v1/orgs/:orgId/usage adds up every call of the org in the window in one statement (all time without from/to).
 * Once an org holds more calls than the database adds up within its statement timeout (about 60 million at 15 s; the
 * dberrors review measured 2,500,000 calls past a 500 ms one), that statement timed out on every try and the answer
 * was 503 DATABASE_UNAVAILABLE "retry later", Retry-After 1, forever, with /readyz green. A statement timeout of the
 * aggregate is now 400 VALIDATION_FAILED naming from/to (narrow the window), while a lock wait (lock_timeout, half
 * the statement timeout: a migration or an operator holding tool_calls) stays 503, to retry.
 *
 * The large org is made cheap here: the usage statement's own transaction is given a 1 ms statement_timeout (SET LOCAL
 * on its connection, just before it), so PostgreSQL ends the real aggregate exactly as it ends a long one.
 */
describe('usage over a window too large to add up in time', () => {
  let t: TestApp;
  let org: string;
  let direct: pg.Client;

  beforeAll(async () => {
    t = await startTestApp({ DB_QUERY_TIMEOUT_MS: '2000' }); // statement_timeout 1 s: lock_timeout 500 ms
    org = await createOrg(t, 'Usage Heavy');
    const run = await insertRun(t.ds, org);
    await insertCalls(t.ds, Array.from({ length: 2_000 }, (_, i) => ({ orgId: org, runId: run, status: i % 2 ? 'succeeded' : 'failed' })));
    direct = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await direct.connect();
  }, 90_000);
  afterAll(async () => {
    await direct?.end();
    await t?.close();
  });

  /** Runs `during` with `before` run just before the usage statement is sent, on its own transaction's connection. */
  async function beforeUsage<T>(before: (c: PoolClient) => Promise<unknown>, during: () => Promise<T>): Promise<T> {
    const sql = t.app.get(Sql) as unknown as { transaction: Transaction };
    const transaction = sql.transaction;
    sql.transaction = <R>(fn: (client: PoolClient) => Promise<R>): Promise<R> =>
      transaction.call(sql, (client: PoolClient) =>
        fn(
          new Proxy(client, {
            get: (c, name, receiver) =>
              name === 'query'
                ? async (text: unknown, params?: unknown[]) => {
                    if (typeof text === 'string' && isUsage(text)) await before(c);
                    return c.query(text as string, params);
                  }
                : Reflect.get(c, name, receiver),
          }),
        ),
      ) as Promise<R>;
    try {
      return await during();
    } finally {
      sql.transaction = transaction;
    }
  }

  it('answers 400 VALIDATION_FAILED naming from/to, not 503 "retry later" (a retry could never succeed)', async () => {
    const whole = await t.http.get(`/v1/orgs/${org}/usage`).set(adminAuth);
    expect(whole.status, JSON.stringify(whole.body)).toBe(200);
    expect(whole.body.byTool).toEqual([expect.objectContaining({ toolName: 'order_lookup', action: 'lookup', calls: 2_000, succeeded: 1_000, failed: 1_000 })]);

    const res = await beforeUsage((c) => c.query(`SET LOCAL statement_timeout = '1ms'`), () => t.http.get(`/v1/orgs/${org}/usage`).set(adminAuth));
    expect([res.status, res.body.code], JSON.stringify(res.body)).toEqual([400, 'VALIDATION_FAILED']);
    expect(res.body.detail).toMatch(/^from\/to: this window holds more of the org's calls than the database adds up within its statement timeout \(1000 ms\); ask for narrower windows/);
    expect(res.headers['retry-after']).toBeUndefined();
    expect((await t.http.get('/readyz')).status).toBe(200);
  });

  it('a lock held on tool_calls is still 503 DATABASE_UNAVAILABLE, by the lock timeout (to retry), and usage answers once it goes', async () => {
    const logged = t.logs.length;
    let locked = false;
    let res;
    try {
      // Taken as the usage statement is about to be sent (the approvals expiry before it would wait on it too).
      res = await beforeUsage(
        async () => {
          locked = true;
          await direct.query('BEGIN');
          await direct.query('LOCK TABLE tool_calls IN ACCESS EXCLUSIVE MODE');
        },
        () => t.http.get(`/v1/orgs/${org}/usage`).set(adminAuth),
      );
    } finally {
      if (locked) await direct.query('ROLLBACK');
    }
    expect([res.status, res.body.code], JSON.stringify(res.body)).toEqual([503, 'DATABASE_UNAVAILABLE']);
    expect(res.headers['retry-after']).toBeDefined();
    // lock_not_available (lock_timeout), not the statement timeout a long aggregate meets.
    expect(t.logs.slice(logged).some((l) => l.includes('"databaseCode":"55P03"'))).toBe(true);
    expect((await t.http.get(`/v1/orgs/${org}/usage`).set(adminAuth)).status).toBe(200);
  });
});
