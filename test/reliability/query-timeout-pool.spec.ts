import 'reflect-metadata';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dbOptions, migratorOptions } from '../../src/db/db-options.js';
import { Sql } from '../../src/db/sql.js';
import { startTcpProxy, viaProxy, type TcpProxy } from '../support/tcp-proxy.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A statement the database does not answer within DB_QUERY_TIMEOUT_MS fails, and its connection must go with it,
 * whichever path ran it. pg's query_timeout answers the caller but leaves the statement in flight; TypeORM
 * releases its connection without the error, so the pool kept it: when the network healed the statement ran, the
 * connection sat in the pool "idle in transaction", and the next autocommit write on it was acknowledged yet seen
 * by no other connection (and rolled back when the pool closed).
 */
describe('a transaction cut off by a partition past DB_QUERY_TIMEOUT_MS', () => {
  const table = `query_timeout_pool_${process.pid}`;
  let proxy: TcpProxy;
  let ds: DataSource;
  let direct: pg.Client;

  beforeAll(async () => {
    direct = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await direct.connect();
    await direct.query(`CREATE TABLE ${table} (v text)`);
    const db = new URL(process.env.DATABASE_URL!);
    proxy = await startTcpProxy(db.hostname, Number(db.port || 5432));
    ds = await new DataSource(dbOptions(viaProxy(proxy), 2, 1_000)).initialize(); // the request pool, at the lowest setting
  });
  afterAll(async () => {
    proxy?.blackhole(false);
    await ds?.destroy().catch(() => undefined); // first: a stale transaction would hold the table
    await direct?.query(`DROP TABLE IF EXISTS ${table}`).catch(() => undefined);
    await direct?.end();
    await proxy?.close();
  });

  /** What another connection (another replica) sees. */
  const seen = async (prefix: string) =>
    ((await direct.query(`SELECT v FROM ${table} WHERE v LIKE $1 ORDER BY v`, [`${prefix}%`])).rows as { v: string }[]).map((r) => r.v);
  const idleInTransaction = async () =>
    ((await direct.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'tool-gateway' AND state = 'idle in transaction'`)).rows[0] as { n: number }).n;

  /**
   * The network goes silent as the transaction's INSERT is sent (its BEGIN went through), and heals once the
   * caller has its answer. Then an unrelated autocommit write, acknowledged: it must be committed.
   */
  async function cutOff(prefix: string, transaction: (insert: string) => Promise<unknown>) {
    await ds.query('SELECT 1'); // a warm connection: the one the transaction and then the write take
    proxy.stallOn(`${prefix}-ghost`);
    const outcome = await transaction(`INSERT INTO ${table} VALUES ('${prefix}-ghost')`).then(
      () => 'committed',
      (e: Error) => e.message,
    );
    expect(proxy.silent()).toBe(true);
    proxy.blackhole(false);
    await sleep(300); // the held INSERT reaches the server, if its connection is still there
    await ds.query(`INSERT INTO ${table} VALUES ('${prefix}-acknowledged')`);
    return { outcome: failedAsCutOff(outcome), seen: await seen(prefix), idleInTransaction: await idleInTransaction() };
  }

  /**
   * The caller hears the client's query_timeout, or the server ending the session it sees idle in the transaction
   * (idle_in_transaction_session_timeout, the same limit, counted from the BEGIN; the proxy holds its bytes but not its
   * closing the connection): whichever comes first,
   * which a loaded machine decides. Either way the statement failed and its connection is gone.
   */
  const failedAsCutOff = (outcome: string) => (outcome === 'Query read timeout' || outcome === 'Connection terminated unexpectedly' ? 'cut off' : outcome);

  it('through TypeORM (ds.transaction: every manager and repository path), the connection is dropped', async () => {
    const res = await cutOff('typeorm', (insert) => ds.transaction((m) => m.query(insert)));
    expect(res).toEqual({ outcome: 'cut off', seen: ['typeorm-acknowledged'], idleInTransaction: 0 });
  });

  it('through Sql.transaction, the connection is dropped', async () => {
    const res = await cutOff('sql', (insert) => new Sql(ds, { DB_CONNECTION_MODE: 'direct' }).transaction((c) => c.query(insert)));
    expect(res).toEqual({ outcome: 'cut off', seen: ['sql-acknowledged'], idleInTransaction: 0 });
  });

  it('the server ends a transaction left idle past DB_QUERY_TIMEOUT_MS; the migrator has its own, longer limit', async () => {
    const qr = ds.createQueryRunner();
    let committed: string;
    try {
      await qr.startTransaction();
      await qr.query(`INSERT INTO ${table} VALUES ('idle-abandoned')`);
      await sleep(1_500);
      committed = await qr.commitTransaction().then(
        () => 'committed',
        () => 'failed',
      );
    } finally {
      await qr.release();
    }
    const migrator = await new DataSource(migratorOptions(process.env.DATABASE_URL!)).initialize();
    try {
      const [{ idle_in_transaction_session_timeout: migratorLimit }] = (await migrator.query('SHOW idle_in_transaction_session_timeout')) as [
        { idle_in_transaction_session_timeout: string },
      ];
      const [{ idle_in_transaction_session_timeout: requestLimit }] = (await ds.query('SHOW idle_in_transaction_session_timeout')) as [
        { idle_in_transaction_session_timeout: string },
      ];
      expect({ committed, seen: await seen('idle'), requestLimit, migratorLimit }).toEqual({ committed: 'failed', seen: [], requestLimit: '1s', migratorLimit: '30s' });
    } finally {
      await migrator.destroy();
    }
  });
});
