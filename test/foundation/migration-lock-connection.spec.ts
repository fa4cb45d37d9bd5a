import pg from 'pg';
import { DataSource, type MigrationInterface, type QueryRunner } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../migrations/index.js';
import { runMigrations } from '../../src/db/migration-runner.js';
import { migratorOptions } from '../../src/db/db-options.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { waitFor } from '../support/wait.js';

/** The advisory lock key runMigrations serialises replicas on (bootstrap.ts). */
const MIGRATION_LOCK = 7_413_920_552;

/**
 * A long migration (an index build over a large tool_calls, as ToolUseOncePerRun's over millions of calls): counts its
 * runs in probe_runs (rolled back with it when it does not finish), then takes `seconds`.
 */
class SlowUpgrade1799999999998 implements MigrationInterface {
  name = 'SlowUpgrade1799999999998';
  async up(q: QueryRunner): Promise<void> {
    await q.query('INSERT INTO probe_runs (at) VALUES (clock_timestamp())');
    await q.query('SELECT pg_sleep(3)');
  }
  async down(): Promise<void> {}
}

/** An upgrade's database: every released migration applied, the probe's table there, `setup` run on it. */
async function upgradeDatabase(prefix: string, setup: (dbName: string) => string[]): Promise<ScratchDatabase> {
  const db = await createScratchDatabase(prefix);
  const ds = await new DataSource(migratorOptions(db.url)).initialize();
  try {
    await runMigrations(ds);
    await ds.query('CREATE TABLE probe_runs (at timestamptz)');
    for (const s of setup(new URL(db.url).pathname.slice(1))) await ds.query(s);
  } finally {
    await ds.destroy();
  }
  return db;
}

/** A replica of the release that adds SlowUpgrade: its migrator data source, as createGateway builds it. */
const replica = (url: string) => new DataSource({ ...migratorOptions(url), migrations: [...MIGRATIONS, SlowUpgrade1799999999998] }).initialize();

const settled = (p: Promise<string[]>) => p.then((r) => ({ r }), (err: unknown) => ({ err: String(err) }));

/** Until the slow migration's pg_sleep runs (the first replica holds the lock and is migrating). */
async function migrating(admin: pg.Client): Promise<void> {
  await waitFor(async () => (await admin.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'SELECT pg_sleep%' AND state = 'active'`)).rowCount! > 0, 'the first replica to migrate', 10_000);
}

async function counts(admin: pg.Client): Promise<{ runs: number; recorded: number }> {
  const [{ runs }] = (await admin.query('SELECT count(*)::int AS runs FROM probe_runs')).rows as [{ runs: number }];
  const [{ recorded }] = (await admin.query(`SELECT count(*)::int AS recorded FROM typeorm_migrations WHERE name = 'SlowUpgrade1799999999998'`)).rows as [{ recorded: number }];
  return { runs, recorded };
}

/**
 * The migration lock (a session-level advisory lock) was taken on one pooled connection and the migrations ran on
 * another: the lock's session sat idle for as long as they ran, so a server ending idle sessions, a network reset, or
 * an operator ending the "idle" holder (README's cure for a lock a pooler left) freed the lock mid-migration, and a
 * second replica ran the same migration again. They run on the lock's connection now.
 */
describe('the migration lock is held by the connection running the migrations', () => {
  it('with idle_session_timeout shorter than a migration, a second replica waits for the first: the migration runs once', async () => {
    // A DBA's reaper of leaked connections (PostgreSQL 14+): 1 s here, so the spec is quick; 5 min in production,
    // against an index build over tens of millions of calls.
    const db = await upgradeDatabase('tg_mig_lock_idle', (name) => [`ALTER DATABASE "${name}" SET idle_session_timeout = 1000`]);
    const [a, b] = [await replica(db.url), await replica(db.url)];
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query('SET idle_session_timeout = 0'); // the spec's own session, idle while it waits, is not reaped
    try {
      const first = settled(runMigrations(a));
      await migrating(admin);
      const second = await settled(runMigrations(b));
      expect({ first: await first, second, ...(await counts(admin)) }).toEqual({
        first: { r: ['SlowUpgrade1799999999998'] },
        second: { r: [] },
        runs: 1,
        recorded: 1,
      });
    } finally {
      await admin.end();
      await a.destroy();
      await b.destroy();
      await db.drop();
    }
  }, 30_000);

  it('the lock holder seen in pg_locks is active while it migrates; ended, its migration is rolled back and the second replica runs it once', async () => {
    const db = await upgradeDatabase('tg_mig_lock_term', () => []);
    const [a, b] = [await replica(db.url), await replica(db.url)];
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      const first = settled(runMigrations(a));
      await migrating(admin);
      let waited = false;
      const second = settled(runMigrations(b, { onWaiting: () => (waited = true) }));
      await waitFor(() => waited, 'the second replica to wait', 10_000);
      // What an operator sees behind "waiting for the migration lock": the holder of the lock, its state and query.
      const holder = await admin.query(
        `SELECT a.pid, a.state, a.query FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
          WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1 AND l.objid = $2
            AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        [Math.floor(MIGRATION_LOCK / 2 ** 32), MIGRATION_LOCK % 2 ** 32],
      );
      const seen = holder.rows[0] as { pid: number; state: string; query: string };
      // Ended all the same (a network reset, a failover): the migration goes with its session, not half-done.
      await admin.query('SELECT pg_terminate_backend($1)', [seen.pid]);
      const [firstDone, secondDone] = [await first, await second];
      expect({ holder: [seen.state, seen.query], first: 'err' in firstDone ? 'failed' : firstDone, second: secondDone, ...(await counts(admin)) }).toEqual({
        holder: ['active', 'SELECT pg_sleep(3)'],
        first: 'failed',
        second: { r: ['SlowUpgrade1799999999998'] },
        runs: 1,
        recorded: 1,
      });
    } finally {
      await admin.end();
      await a.destroy().catch(() => undefined);
      await b.destroy();
      await db.drop();
    }
  }, 30_000);
});
