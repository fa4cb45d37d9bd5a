import pg from 'pg';
import { DataSource } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../migrations/index.js';
import { longLockHolders } from '../../src/db/migration-executor.js';
import { runMigrations } from '../../src/db/migration-runner.js';
import { dbOptions, migratorOptions } from '../../src/db/db-options.js';
import { pendingMigrations } from '../../src/db/pending-migrations.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { waitFor } from '../support/wait.js';

const ORG = '00000000-0000-4000-8000-000000000001';
const RUN = '00000000-0000-4000-8000-0000000000a1';
const CALL = '00000000-0000-4000-8000-0000000000c1';

/** The names of the migrations from `name` (included) to the last: what a database from before `name` has pending. */
const fromOn = (name: string): string[] => MIGRATIONS.slice(MIGRATIONS.findIndex((m) => m.name === name)).map((m) => m.name);

/** The previous release's database: every migration before `first` (the later ones undone), and one recorded call. */
async function previousRelease(prefix: string, first: string): Promise<ScratchDatabase> {
  const undo = fromOn(first).length;
  const db = await createScratchDatabase(prefix);
  const setup = await new DataSource(migratorOptions(db.url)).initialize();
  try {
    await runMigrations(setup);
    for (let i = 0; i < undo; i++) await setup.undoLastMigration({ transaction: 'each' });
    await setup.query(`INSERT INTO orgs (id, name) VALUES ($1, 'o')`, [ORG]);
    await setup.query(`INSERT INTO agent_runs (id, org_id, specialist_id, status, metadata) VALUES ($1, $2, 's', 'running', '{}')`, [RUN, ORG]);
    await setup.query(
      `INSERT INTO tool_calls (id, org_id, run_id, specialist_id, tool_name, action, status, correlation_id, idempotency_key, tool_use_id, action_digest, input_redacted)
       VALUES ($1, $2, $3, 's', 't', 'a', 'succeeded', 'c', 'k', 'tu', 'd', '{}')`,
      [CALL, ORG, RUN],
    );
  } finally {
    await setup.destroy();
  }
  return db;
}

/** A session of its own holding `lock` on tool_calls in an open transaction (a pg_dump, a report, a manual session). */
async function holding(url: string, lock: string): Promise<pg.Client & { pid: number }> {
  const c = new pg.Client({ connectionString: url, application_name: 'nightly-report' });
  await c.connect();
  await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  await c.query(lock);
  return Object.assign(c, { pid: (c as unknown as { processID: number }).processID });
}

const applied = async (url: string, name: string): Promise<boolean> => {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query('SELECT 1 FROM typeorm_migrations WHERE name = $1', [name])).rowCount! > 0;
  } finally {
    await c.end();
  }
};

/**
 * ToolUseUniqueColumn's ADD COLUMN takes ACCESS EXCLUSIVE on tool_calls, and had no lock timeout: queued behind a long
 * reader, it stalled every later query of tool_calls, those of the previous release still serving included, until
 * their statement timeouts answered 503. Each migration now waits for its table locks no longer than lock_timeout
 * (SET LOCAL in its transaction), is rolled back, and the run is tried again after a pause, then fails naming it.
 */
describe('migrations wait for table locks for a bounded time, then try again', () => {
  it('behind a long reader of tool_calls, the previous release reads on; the migration is tried again, said, and applied once the reader is gone', async () => {
    const db = await previousRelease('tg_mig_lockwait', 'ToolUseUniqueColumn1765700000000');
    const reader = await holding(db.url, 'SELECT count(*) FROM tool_calls');
    // The previous release, serving: its request pool, with a statement timeout (15 s in production; 3 s here).
    const old = await new DataSource(dbOptions(db.url, 2, 3_000)).initialize();
    const migrator = await new DataSource(migratorOptions(db.url)).initialize();
    const lines: string[] = [];
    let migrated: Promise<unknown> | undefined;
    try {
      migrated = runMigrations(migrator, { tableLockTimeoutMs: 500, tableLockPauseMs: 200, tableLockAttempts: 50, onTableLockWait: (l) => lines.push(l) }).then(
        (r) => r,
        (e: unknown) => `failed: ${String(e)}`,
      );
      const admin = new pg.Client({ connectionString: db.url });
      await admin.connect();
      try {
        await waitFor(
          async () => (await admin.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE 'ALTER TABLE tool_calls ADD COLUMN%'`)).rowCount! > 0,
          'the migration to wait for its lock',
          5_000,
        );
      } finally {
        await admin.end();
      }
      // A replay, a detail view, a listing of the previous release: queued behind the migration's lock request for
      // no longer than its lock timeout.
      const started = performance.now();
      const read = await old.query('SELECT status FROM tool_calls WHERE id = $1', [CALL]).then(
        (rows: { status: string }[]) => rows[0]?.status,
        (e: { code?: string; message?: string }) => `failed ${e.code}: ${e.message}`,
      );
      const waitedMs = performance.now() - started;
      expect({ read, waited: waitedMs < 1_500 ? 'under 1.5 s' : `${Math.round(waitedMs)} ms` }).toEqual({ read: 'succeeded', waited: 'under 1.5 s' });
      await waitFor(() => lines.length >= 2, 'the migration to say it waits, twice', 10_000);
      expect(lines[0]).toEqual(
        expect.stringMatching(
          new RegExp(
            `^migration ToolUseUniqueColumn1765700000000 waited 500 ms for a table lock and was rolled back \\(try 1 of 50\\): ALTER TABLE tool_calls ADD COLUMN tool_use_unique .*; ` +
              `held by pid ${reader.pid} \\(application "nightly-report", idle in transaction, transaction open \\d+ s, on tool_calls\\); trying again in 200 ms$`,
          ),
        ),
      );
      expect(await pendingMigrations(migrator)).toEqual(fromOn('ToolUseUniqueColumn1765700000000'));
      await reader.query('COMMIT');
      expect(await migrated).toEqual(fromOn('ToolUseUniqueColumn1765700000000'));
    } finally {
      await reader.query('ROLLBACK').catch(() => undefined);
      await reader.end();
      await migrated;
      await old.destroy();
      await migrator.destroy();
      await db.drop();
    }
  }, 30_000);

  it("ToolUseOncePerRun's LOCK TABLE behind an open write gives up after its tries: a clear error naming it, nothing of it applied", async () => {
    const db = await previousRelease('tg_mig_lockfail', 'ToolUseOncePerRun1765710000000'); // its column is there
    // A write left open on tool_calls (ROW EXCLUSIVE: the SHARE ROW EXCLUSIVE the migration asks for waits for it).
    const writer = await holding(db.url, `UPDATE tool_calls SET status = status WHERE id = '${CALL}'`);
    const migrator = await new DataSource(migratorOptions(db.url)).initialize();
    const lines: string[] = [];
    let migrated: Promise<unknown> | undefined;
    try {
      migrated = runMigrations(migrator, { tableLockTimeoutMs: 300, tableLockPauseMs: 100, tableLockAttempts: 3, onTableLockWait: (l) => lines.push(l) }).then(
        (r) => r,
        (e: unknown) => e,
      );
      // Before: no lock timeout, it waited for as long as the write stayed open.
      const outcome = await Promise.race([migrated, new Promise((r) => setTimeout(() => r('still waiting after 8 s'), 8_000))]);
      expect(outcome).toMatchObject({
        name: 'MigrationTableLockTimeout',
        message: expect.stringMatching(
          new RegExp(
            '^migration ToolUseOncePerRun1765710000000 could not take a table lock within 300 ms, 3 time\\(s\\), and was rolled back each time \\(nothing of it is applied\\): ' +
              `let the sessions holding locks on its tables finish, or end them .*, then start again; holding locks now: pid ${writer.pid} \\(application "nightly-report", idle in transaction, transaction open \\d+ s, on tool_calls\\)`,
          ),
        ),
      });
      expect(lines.map((l) => l.replace(/:.*/, ''))).toEqual([
        'migration ToolUseOncePerRun1765710000000 waited 300 ms for a table lock and was rolled back (try 1 of 3)',
        'migration ToolUseOncePerRun1765710000000 waited 300 ms for a table lock and was rolled back (try 2 of 3)',
      ]);
      expect(await applied(db.url, 'ToolUseOncePerRun1765710000000')).toBe(false);
      // The migration lock was let go: the next start (the write done) applies it.
      await writer.query('COMMIT');
      expect(await runMigrations(migrator)).toEqual(fromOn('ToolUseOncePerRun1765710000000'));
    } finally {
      await writer.query('ROLLBACK').catch(() => undefined);
      await writer.end();
      await migrated;
      await migrator.destroy();
      await db.drop();
    }
  }, 30_000);

  it("a copy of the database (CREATE DATABASE … TEMPLATE: a staging clone, a restore test) is not this one: its sessions' locks are not named", async () => {
    const db = await createScratchDatabase('tg_mig_holders');
    let copy: ScratchDatabase | undefined;
    const sessions: (pg.Client & { pid: number })[] = [];
    let ds: DataSource | undefined;
    try {
      const setup = await new DataSource(migratorOptions(db.url)).initialize();
      await runMigrations(setup).finally(() => setup.destroy());
      // Its tables are the template's, with the same oids: pg_locks tells them apart by its database column only.
      copy = await createScratchDatabase('tg_mig_holders_copy', { template: new URL(db.url).pathname.slice(1) });
      const there = await holding(copy.url, 'SELECT count(*) FROM tool_calls');
      const here = await holding(db.url, 'SELECT count(*) FROM tool_calls');
      sessions.push(there, here);
      await new Promise((r) => setTimeout(r, 300));
      ds = await new DataSource(migratorOptions(db.url)).initialize();
      const qr = ds.createQueryRunner();
      try {
        const holders = await longLockHolders(qr, 100);
        expect(holders.map((h) => Number(/^pid (\d+) /.exec(h)?.[1]))).toEqual([here.pid]);
      } finally {
        await qr.release();
      }
    } finally {
      for (const s of sessions) await s.end().catch(() => undefined);
      await ds?.destroy();
      await copy?.drop();
      await db.drop();
    }
  }, 30_000);
});
