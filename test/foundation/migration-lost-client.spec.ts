import pg from 'pg';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../migrations/index.js';
import { migratorOptions } from '../../src/db/db-options.js';
import { runMigrations } from '../../src/db/migration-runner.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { waitFor } from '../support/wait.js';

/** The advisory lock key runMigrations serialises replicas on (migration-runner.ts). */
const MIGRATION_LOCK = 7_413_920_552;
/** The migration whose first statement the partition swallows: it builds a unique index on tool_calls. */
const STALLED = 'ToolUseOncePerRun1765710000000';
/** The migrator's idle-in-transaction bound for this test (MIGRATOR_IDLE_IN_TRANSACTION_MS is 30 s). */
const IDLE_MS = 2_000;

let db: ScratchDatabase;
let proxy: TcpProxy;
let admin: pg.Client;

beforeAll(async () => {
  db = await createScratchDatabase('tg_mig_lost_client');
  // A database of the release before STALLED, so that it is pending.
  const ds = await new DataSource({ ...migratorOptions(db.url), migrations: MIGRATIONS.slice(0, MIGRATIONS.findIndex((m) => m.name === STALLED)) }).initialize();
  try {
    await runMigrations(ds);
  } finally {
    await ds.destroy();
  }
  const u = new URL(db.url);
  proxy = await startTcpProxy(u.hostname, Number(u.port || 5432));
  admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
});

afterAll(async () => {
  await admin?.end();
  await proxy?.close();
  await db?.drop();
});

const heldByOthers = async (): Promise<{ toolCallsLocks: number; migrationLock: number }> => {
  const { rows } = await admin.query<{ t: number; m: number }>(
    `SELECT (SELECT count(*)::int FROM pg_locks WHERE relation = 'tool_calls'::regclass AND granted AND pid <> pg_backend_pid()) AS t,
            (SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = $2
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS m`,
    [Math.floor(MIGRATION_LOCK / 2 ** 32), MIGRATION_LOCK % 2 ** 32],
  );
  return { toolCallsLocks: rows[0].t, migrationLock: rows[0].m };
};

/**
 * A migration whose client is lost without the server hearing of it (its host gone, a partition, a dropped NAT entry:
 * no FIN, no RST) left its transaction idle on the server with no bound — the migrator's sessions had
 * idle_in_transaction_session_timeout=0 — holding the table locks it had taken and the migration lock until the
 * server's TCP keepalive gave up (two hours by default): calls being recorded waited, then 503; replicas starting and
 * any re-run waited for the lock. The server now ends such a transaction, and the session with its locks.
 */
describe('a migration whose client is partitioned away mid-way', () => {
  it('is ended by the server: its table locks and the migration lock are released, and a re-run completes', async () => {
    const viaProxy = new URL(db.url);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    const lost = await new DataSource({ ...migratorOptions(viaProxy.toString(), 'direct', IDLE_MS), migrations: MIGRATIONS }).initialize();
    // The migration takes its table lock (SET LOCAL lock_timeout, a LOCK or the index build); the proxy swallows the
    // index build itself and everything after, answering nothing.
    proxy.stallOn('CREATE UNIQUE INDEX');
    const running = runMigrations(lost).then(
      () => 'finished',
      () => 'failed',
    );
    await waitFor(() => proxy.silent() || undefined, 'the migration reaching its index build');
    // While the client is lost the migration holds the lock it serialises on (and whatever table locks it took).
    expect((await heldByOthers()).migrationLock).toBe(1);
    const cut = Date.now();
    await waitFor(async () => {
      const held = await heldByOthers();
      return (held.migrationLock === 0 && held.toolCallsLocks === 0) || undefined;
    }, 'the lost migration\'s locks released', 15_000);
    const releasedAfterMs = Date.now() - cut;

    // A writer of tool_calls is not held, and a re-run (another replica starting) takes the lock and finishes the job.
    await admin.query(`SET lock_timeout = '2s'`);
    await admin.query(`UPDATE tool_calls SET updated_at = now() WHERE false`);
    const again = await new DataSource({ ...migratorOptions(db.url), migrations: MIGRATIONS }).initialize();
    try {
      expect(await runMigrations(again)).toContain(STALLED);
    } finally {
      await again.destroy();
    }
    expect(releasedAfterMs).toBeLessThan(IDLE_MS + 8_000);
    await proxy.close();
    expect(await running).toBe('failed');
    await lost.destroy().catch(() => undefined);
  }, 60_000);
});
