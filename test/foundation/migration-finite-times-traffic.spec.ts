import pg from 'pg';
import { DataSource, type MigrationInterface, type QueryRunner } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FiniteTimes1766400000000 } from '../../migrations/1766400000000-finite-times.js';
import { MIGRATIONS } from '../../migrations/index.js';
import { runMigrations } from '../../src/db/migration-runner.js';
import { migratorOptions } from '../../src/db/db-options.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { waitFor } from '../support/wait.js';

const ORG = '00000000-0000-4000-8000-000000000001';

/**
 * FiniteTimes1766400000000 adds a CHECK to twelve tables while replicas of the previous release serve. Its first form
 * did them in one transaction: it held each table done (ACCESS EXCLUSIVE) while it waited for the next, whose rows an
 * old replica's transaction held while that transaction went on to read a table already done — a deadlock (the review
 * of rolling deploys, a release of the previous week serving ten clients: the new release refused to start, or old
 * replicas answered 503), and every read of the tables done waited for the rest. Here the old replica is a session
 * doing what its transactions do (a write to approval_requests, then a read of orgs, api_keys and agent_runs, which the
 * migration takes before approval_requests): the migration waits for it holding no other table, the session's reads
 * go on, both finish.
 */
describe('FiniteTimes1766400000000 beside the previous release\'s transactions', () => {
  let db: ScratchDatabase;

  beforeAll(async () => {
    db = await createScratchDatabase('tg_finite_traffic');
    const before = MIGRATIONS.slice(0, MIGRATIONS.indexOf(FiniteTimes1766400000000));
    const old = await new DataSource({ ...migratorOptions(db.url), migrations: before }).initialize();
    try {
      await runMigrations(old);
      await old.query(`INSERT INTO orgs (id, name) VALUES ($1, 'o')`, [ORG]);
    } finally {
      await old.destroy();
    }
  }, 90_000);
  afterAll(async () => {
    await db?.drop();
  });

  it('waits for a transaction holding approval_requests without holding the tables it did, and neither is rolled back', async () => {
    const oldReplica = new pg.Client({ connectionString: db.url, application_name: 'previous-release' });
    await oldReplica.connect();
    const watcher = new pg.Client({ connectionString: db.url });
    await watcher.connect();
    const ds = await new DataSource(migratorOptions(db.url)).initialize();
    try {
      await oldReplica.query('BEGIN');
      await oldReplica.query(`UPDATE approval_requests SET reason = reason WHERE org_id = $1`, [ORG]);
      let migrated: unknown;
      const migrating = runMigrations(ds).then(
        (names) => (migrated = names),
        (err: unknown) => (migrated = err),
      );
      // The migration has reached approval_requests and waits for the old replica's transaction there.
      await waitFor(async () => {
        const { rows } = await watcher.query(
          `SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'approval_requests' AND NOT l.granted AND l.mode = 'AccessExclusiveLock'`,
        );
        return rows.length > 0;
      }, 'the migration waiting for approval_requests', 20_000);
      // Meanwhile the old replica's transaction reads the tables the migration did before (its CHECKs are there):
      // nothing of theirs is held, so no wait and no deadlock (deadlock_timeout is 1 s: this waits 3).
      await oldReplica.query(`SET LOCAL statement_timeout = '3s'`);
      const started = Date.now();
      const read = await oldReplica.query(
        `SELECT (SELECT count(*) FROM orgs)::int AS orgs, (SELECT count(*) FROM api_keys)::int AS keys, (SELECT count(*) FROM agent_runs)::int AS runs`,
      );
      expect(read.rows[0]).toMatchObject({ orgs: 1 });
      expect(Date.now() - started).toBeLessThan(2_500);
      const { rows: held } = await watcher.query(
        `SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
          WHERE l.mode = 'AccessExclusiveLock' AND l.granted AND c.relname IN ('orgs', 'api_keys', 'agent_runs')`,
      );
      expect(held).toEqual([]);
      await oldReplica.query('COMMIT');
      await migrating;
      expect(migrated).toEqual(['FiniteTimes1766400000000']);
      const { rows } = await watcher.query(`SELECT count(*) FILTER (WHERE convalidated)::int AS valid, count(*)::int AS n FROM pg_constraint WHERE conname LIKE '%\\_times\\_finite' AND conname <> 'tool_calls_times_finite'`);
      expect(rows[0]).toEqual({ valid: 11, n: 12 }); // policy_decisions' is NOT VALID: its rows are a record
    } finally {
      await oldReplica.query('ROLLBACK').catch(() => undefined);
      await oldReplica.end();
      await watcher.end();
      await ds.destroy();
    }
  }, 60_000);

  it('applied again over its own constraints (a run stopped midway, or reverted: its down keeps them), it adds none twice', async () => {
    const ds = await new DataSource(migratorOptions(db.url)).initialize();
    try {
      await ds.undoLastMigration({ transaction: 'each' });
      expect(await runMigrations(ds)).toEqual(['FiniteTimes1766400000000']);
      const [{ n }] = (await ds.query(`SELECT count(*)::int AS n FROM pg_constraint WHERE conname LIKE '%\\_times\\_finite'`)) as { n: number }[];
      expect(n).toBe(13);
    } finally {
      await ds.destroy();
    }
  }, 60_000);

  it('a migration that loses a deadlock is rolled back and tried again, the wait said, as one that waited out its lock timeout', async () => {
    let tries = 0;
    /** A later release's migration whose first try PostgreSQL picks as the deadlock's victim (its transaction rolled back). */
    class LosesADeadlockOnce1799999999995 implements MigrationInterface {
      name = 'LosesADeadlockOnce1799999999995';
      async up(q: QueryRunner): Promise<void> {
        await q.query(`CREATE TABLE deadlock_once (id int)`);
        if (++tries === 1) await q.query(`DO $$ BEGIN RAISE EXCEPTION 'deadlock detected' USING ERRCODE = 'deadlock_detected'; END $$`);
      }
      async down(q: QueryRunner): Promise<void> {
        await q.query('DROP TABLE deadlock_once');
      }
    }
    const ds = await new DataSource({ ...migratorOptions(db.url), migrations: [...MIGRATIONS, LosesADeadlockOnce1799999999995] }).initialize();
    const lines: string[] = [];
    try {
      expect(await runMigrations(ds, { tableLockPauseMs: 50, onTableLockWait: (l) => lines.push(l) })).toEqual(['LosesADeadlockOnce1799999999995']);
      expect(tries).toBe(2);
      expect(lines).toEqual([expect.stringMatching(/^migration LosesADeadlockOnce1799999999995 lost a deadlock with another session and was rolled back \(try 1 of 5\)/)]);
      await ds.undoLastMigration({ transaction: 'each' });
    } finally {
      await ds.destroy();
    }
  }, 60_000);
});
