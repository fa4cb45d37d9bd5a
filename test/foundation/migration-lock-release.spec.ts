import pg from 'pg';
import { DataSource, type MigrationInterface, type QueryRunner } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../migrations/index.js';
import { MigrationsStopped, runMigrations } from '../../src/db/migration-runner.js';
import { migratorOptions } from '../../src/db/db-options.js';
import { createScratchDatabase } from '../support/scratch-database.js';
import { waitFor } from '../support/wait.js';

/** The advisory lock key runMigrations serialises replicas on (migration-runner.ts). */
const MIGRATION_LOCK = 7_413_920_552;

/**
 * A migration run outside a transaction (`transaction = false`) that opens one itself and fails in it: its session is
 * left in an aborted transaction, where every statement fails (25P02), the lock's release among them.
 */
class AbortedInside1799999999997 implements MigrationInterface {
  name = 'AbortedInside1799999999997';
  transaction = false as const;
  async up(q: QueryRunner): Promise<void> {
    await q.query('BEGIN');
    await q.query('SELECT 1 / 0');
  }
  async down(): Promise<void> {}
}

/** The next release's migration: pending, so the second replica must take the lock to run it. */
class NextRelease1799999999998 implements MigrationInterface {
  name = 'NextRelease1799999999998';
  async up(q: QueryRunner): Promise<void> {
    await q.query('SELECT 1');
  }
  async down(): Promise<void> {}
}

const lockHolders = async (admin: pg.Client): Promise<number> =>
  (
    await admin.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = $1 AND objid = $2
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, [
      Math.floor(MIGRATION_LOCK / 2 ** 32),
      MIGRATION_LOCK % 2 ** 32,
    ])
  ).rows[0].n as number;

/**
 * The migration lock's release failed (its session in an aborted transaction; a query timeout) and the connection went
 * back to the pool all the same, still holding the session-level lock: every other replica's start-up then waited for
 * it for as long as that process lived. A connection whose unlock fails is now closed, which frees the lock with it.
 */
describe('a migration lock that could not be released', () => {
  it('is freed with its connection: a second replica migrates at once instead of waiting for a lock nobody holds', async () => {
    const db = await createScratchDatabase('tg_mig_lock_release');
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    const a = await new DataSource({ ...migratorOptions(db.url), migrations: [...MIGRATIONS, AbortedInside1799999999997] }).initialize();
    const b = await new DataSource({ ...migratorOptions(db.url), migrations: [...MIGRATIONS, NextRelease1799999999998] }).initialize();
    try {
      const first = await runMigrations(a).then(
        () => 'migrated',
        (err: unknown) => String(err),
      );
      expect(first).toMatch(/division by zero/);
      // The session that held the lock is gone (asynchronously: the server ends it once the client closes).
      await waitFor(async () => (await lockHolders(admin)) === 0, 'the migration lock to be freed', 5_000).catch(() => undefined);
      const started = performance.now();
      const second = await runMigrations(b, { stopRequested: () => performance.now() - started > 3_000 }).then(
        (names) => names,
        (err: unknown) => (err instanceof MigrationsStopped ? 'still waiting for the lock after 3 s' : String(err)),
      );
      expect({ holders: await lockHolders(admin), second }).toEqual({ holders: 0, second: ['NextRelease1799999999998'] });
    } finally {
      await admin.end();
      await a.destroy();
      await b.destroy();
      await db.drop();
    }
  }, 30_000);
});
