import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { DataSource, type MigrationInterface, type QueryRunner } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovalInputs1764700000000 } from '../../migrations/1764700000000-approval-inputs.js';
import { ToolUseOncePerRun1765710000000 } from '../../migrations/1765710000000-tool-use-once-per-run.js';
import { MIGRATIONS } from '../../migrations/index.js';
import { runMigrations } from '../../src/db/migration-runner.js';
import { dbOptions, migratorOptions } from '../../src/db/db-options.js';
import { pendingMigrations } from '../../src/db/pending-migrations.js';
import { runBuiltCli } from '../support/built-cli.js';
import { appendToRunLog } from '../support/run-log.js';
import { startTestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { createScratchDatabase, dropScratchDatabase } from '../support/scratch-database.js';

/** The advisory lock key runMigrations serialises replicas on (bootstrap.ts). */
const MIGRATION_LOCK = 7_413_920_552;

describe('migrations when several replicas start together', () => {
  let holder: pg.Client;

  beforeAll(async () => {
    holder = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
  });
  afterAll(async () => {
    await holder?.end();
  });

  async function lockHolder(url: string): Promise<pg.Client> {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    return c;
  }

  /** A fresh database (every migration pending), and on it a pool like `runMigrations` is given, with `statementTimeoutMs`. */
  async function freshDatabase(statementTimeoutMs: number): Promise<{ url: string; ds: DataSource; drop(): Promise<void> }> {
    const db = await createScratchDatabase('tg_migrate_wait');
    // Two pooled connections (the lock's and the migrations'), and a statement timeout far shorter than a migration can take.
    const base = dbOptions(db.url, 2);
    const ds = await new DataSource({ ...base, extra: { ...(base.extra as object), statement_timeout: statementTimeoutMs } } as typeof base).initialize();
    return { url: db.url, ds, drop: async () => (await ds.destroy(), await db.drop()) };
  }

  it('a replica waits for the one migrating, past its statement timeout, and its pooled connection gets the timeout back', async () => {
    const fresh = await freshDatabase(300);
    const other = await lockHolder(fresh.url); // advisory locks are per database
    try {
      await other.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]); // "another replica is migrating"
      let settled = false;
      const waiting = runMigrations(fresh.ds).finally(() => (settled = true));
      await new Promise((r) => setTimeout(r, 1_000)); // more than three statement timeouts
      expect(settled).toBe(false);
      await other.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
      await waiting; // resolves: it neither crashed nor gave up
      expect(await pendingMigrations(fresh.ds)).toEqual([]);

      // Both pooled connections, held at once so each is looked at.
      const runners = [fresh.ds.createQueryRunner(), fresh.ds.createQueryRunner()];
      try {
        const shown = await Promise.all(runners.map(async (qr) => ((await qr.query('SHOW statement_timeout')) as { statement_timeout: string }[])[0].statement_timeout));
        expect(shown).toEqual(['300ms', '300ms']);
      } finally {
        await Promise.all(runners.map((qr) => qr.release()));
      }
    } finally {
      await other.end();
      await fresh.drop();
    }
  });

  it('migration:run says it is waiting for the lock (not silence), then lists what it applied', async () => {
    const db = await createScratchDatabase('tg_migrate_cli_wait');
    const other = await lockHolder(db.url); // advisory locks are per database
    try {
      await other.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      const run = runBuiltCli('migrate', ['run'], { DATABASE_URL: db.url });
      // Released once the CLI has found it held (a try that failed), not after a fixed sleep: on a loaded machine the
      // CLI took longer than 1.5 s to reach the lock, found it free, and had nothing to wait for.
      await waitFor(async () => {
        const tried = await other.query(
          `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle' AND query LIKE 'SELECT pg_try_advisory_lock%'`,
        );
        return tried.rowCount! > 0;
      }, 'migration:run to try the held lock', 30_000);
      await other.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
      const r = await run;
      expect(r.code).toBe(0);
      expect(r.stderr).toContain('waiting for the migration lock: another gateway or migration:run is migrating the database');
      expect(r.stdout.trim()).toBe(`applied ${MIGRATIONS.length} migration(s):\n${MIGRATIONS.map((m) => `  - ${m.name}`).join('\n')}\nmigrations are up to date`);
    } finally {
      await other.end();
      await db.drop();
    }
  }, 60_000);

  it('with none pending (every start but an upgrade\'s) no lock is taken: a replica holding it does not hold the others up', async () => {
    const ds = await new DataSource(migratorOptions(process.env.DATABASE_URL!)).initialize(); // the run's database
    try {
      await runMigrations(ds); // up to date (whether or not a spec before this one started an app on it)
      await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      const started = performance.now();
      await runMigrations(ds, { onWaiting: () => expect.fail('it waited for the lock') });
      expect(performance.now() - started).toBeLessThan(1_000);
      // And it took none: another session gets it at once (a transaction-mode pooler could leave a lock taken and
      // released at every start held on a server connection another client then had).
      const [{ held }] = (await ds.query(`SELECT count(*)::int AS held FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND pid <> $1 AND pid IN (SELECT pid FROM pg_stat_activity WHERE application_name = 'tool-gateway')`, [
        (holder as unknown as { processID: number }).processID,
      ])) as [{ held: number }];
      expect(held).toBe(0);
    } finally {
      await holder.query('SELECT pg_advisory_unlock_all()');
      await ds.destroy();
    }
  });

  it('the gateway migrates on connections without the client-side query timeout: waiting longer than DB_QUERY_TIMEOUT_MS for another replica is fine', async () => {
    const db = await createScratchDatabase('tg_migrate_wait_app'); // every migration pending
    const other = await lockHolder(db.url);
    await other.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]); // "another replica is migrating"
    let unlocked = false;
    try {
      const started = startTestApp({ DATABASE_URL: db.url, DB_QUERY_TIMEOUT_MS: '1000' }).then(
        (t) => ({ t }),
        (err: unknown) => ({ err }),
      );
      await new Promise((r) => setTimeout(r, 2_500)); // two and a half query timeouts
      let settled = false;
      void started.finally(() => (settled = true));
      await new Promise((r) => setImmediate(r));
      expect(settled, 'it should have waited for the lock').toBe(false);
      await other.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
      unlocked = true;
      const result = await started;
      expect('err' in result ? String(result.err) : 'started').toBe('started');
      if ('t' in result) await result.t.close();
    } finally {
      if (!unlocked) await other.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
      await other.end();
      await db.drop();
    }
  });

  it('reverting the approval-inputs migration gives each run back its total cost, computed from its calls', async () => {
    const server = new URL(process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL!);
    const dbName = `tg_down_${process.pid}_${Date.now()}`;
    await holder.query(`CREATE DATABASE ${dbName}`);
    const url = new URL(server.toString());
    url.pathname = `/${dbName}`;
    const scratch = await new DataSource(dbOptions(url.toString(), 2)).initialize();
    try {
      await runMigrations(scratch);
      const org = '00000000-0000-4000-8000-000000000001';
      const [run1, run2] = ['00000000-0000-4000-8000-0000000000a1', '00000000-0000-4000-8000-0000000000a2'];
      await scratch.query(`INSERT INTO orgs (id, name) VALUES ($1, 'o')`, [org]);
      for (const run of [run1, run2]) {
        await scratch.query(`INSERT INTO agent_runs (id, org_id, specialist_id, status, metadata) VALUES ($1, $2, 's', 'running', '{}')`, [run, org]);
      }
      const calls: [string, number][] = [[run1, 5], [run1, 2], [run1, 0]];
      for (const [i, [run, cost]] of calls.entries()) {
        await scratch.query(
          `INSERT INTO tool_calls (id, org_id, run_id, specialist_id, tool_name, action, status, correlation_id, idempotency_key, tool_use_id, action_digest, input_redacted, cost_cents)
           VALUES (gen_random_uuid(), $1, $2, 's', 't', 'a', 'succeeded', 'c', $3, $3, 'd', '{}', $4)`,
          [org, run, `k${i}`, cost],
        );
      }
      // Undo the migrations after it, then it.
      for (let n = MIGRATIONS.length - MIGRATIONS.indexOf(ApprovalInputs1764700000000); n > 0; n--) await scratch.undoLastMigration({ transaction: 'each' });
      const rows = (await scratch.query('SELECT id, total_cost_cents FROM agent_runs ORDER BY id')) as { id: string; total_cost_cents: string }[];
      expect(rows.map((r) => [r.id, Number(r.total_cost_cents)])).toEqual([[run1, 7], [run2, 0]]);
    } finally {
      await scratch.destroy();
      await dropScratchDatabase(holder, dbName); // leak-scanned first: the run-wide scan never sees it
    }
  });
});

/** How many undoLastMigration calls take a fully migrated database back to before `m` (the later ones undone first). */
const undoneToBefore = (m: (typeof MIGRATIONS)[number]): number => MIGRATIONS.length - MIGRATIONS.indexOf(m);

describe('the tool_use id made unique per run over a ledger that already holds it twice', () => {
  it('earlier calls stay as they were, all but the first of a tool_use marked; from then on the id is taken once per run', async () => {
    const db = await createScratchDatabase('tg_migrate_tool_use');
    const scratch = await new DataSource(dbOptions(db.url, 2)).initialize();
    try {
      await runMigrations(scratch);
      // Back to before ToolUseOncePerRun and its column (the migrations after them undone first).
      for (let n = undoneToBefore(ToolUseOncePerRun1765710000000) + 1; n > 0; n--) await scratch.undoLastMigration({ transaction: 'each' });
      const org = '00000000-0000-4000-8000-000000000001';
      const run = '00000000-0000-4000-8000-0000000000a1';
      await scratch.query(`INSERT INTO orgs (id, name) VALUES ($1, 'o')`, [org]);
      await scratch.query(`INSERT INTO agent_runs (id, org_id, specialist_id, status, metadata) VALUES ($1, $2, 's', 'running', '{}')`, [run, org]);
      const insert = (key: string, toolUseId: string, createdAt: string) =>
        scratch.query(
          `INSERT INTO tool_calls (id, org_id, run_id, specialist_id, tool_name, action, status, correlation_id, idempotency_key, tool_use_id, action_digest, input_redacted, created_at)
           VALUES (gen_random_uuid(), $1, $2, 's', 't', 'a', 'succeeded', 'c', $3, $4, 'd', '{}', $5)`,
          [org, run, key, toolUseId, createdAt],
        );
      // One tool_use sent under three keys (the same write run three times, before), and another sent once.
      await insert('key:c', 'toolu_dup', '2026-12-01T10:00:02Z');
      await insert('key:a', 'toolu_dup', '2026-12-01T10:00:00Z');
      await insert('key:b', 'toolu_dup', '2026-12-01T10:00:01Z');
      await insert('run:x', 'toolu_one', '2026-12-01T10:00:03Z');

      await runMigrations(scratch);
      const rows = (await scratch.query('SELECT idempotency_key, tool_use_unique FROM tool_calls ORDER BY idempotency_key')) as { idempotency_key: string; tool_use_unique: boolean }[];
      expect(rows.map((r) => [r.idempotency_key, r.tool_use_unique])).toEqual([['key:a', true], ['key:b', false], ['key:c', false], ['run:x', true]]);
      for (const toolUseId of ['toolu_dup', 'toolu_one']) {
        await expect(insert(`key:new-${toolUseId}`, toolUseId, '2026-12-01T11:00:00Z')).rejects.toMatchObject({ code: '23505', constraint: 'tool_calls_run_tool_use_uq' });
      }
      // Reverted, the marks go with the index: re-applied, the marking starts from the rows as they are.
      for (let n = undoneToBefore(ToolUseOncePerRun1765710000000); n > 0; n--) await scratch.undoLastMigration({ transaction: 'each' });
      expect(await scratch.query('SELECT count(*)::int AS n FROM tool_calls WHERE NOT tool_use_unique')).toEqual([{ n: 0 }]);
    } finally {
      await scratch.destroy();
      await db.drop();
    }
  });

  it('while it marks and builds, reads of tool_calls go on and writes wait (its column was added by a migration of its own)', async () => {
    const db = await createScratchDatabase('tg_migrate_tool_use_lock');
    const scratch = await new DataSource(dbOptions(db.url, 2)).initialize();
    const other = new pg.Client({ connectionString: db.url });
    await other.connect();
    const qr = scratch.createQueryRunner();
    try {
      await runMigrations(scratch);
      for (let n = undoneToBefore(ToolUseOncePerRun1765710000000); n > 0; n--) await scratch.undoLastMigration({ transaction: 'each' }); // the column stays
      const org = '00000000-0000-4000-8000-000000000001';
      const run = '00000000-0000-4000-8000-0000000000a1';
      await scratch.query(`INSERT INTO orgs (id, name) VALUES ($1, 'o')`, [org]);
      await scratch.query(`INSERT INTO agent_runs (id, org_id, specialist_id, status, metadata) VALUES ($1, $2, 's', 'running', '{}')`, [run, org]);
      const insert = (n: number) =>
        other.query(
          `INSERT INTO tool_calls (id, org_id, run_id, specialist_id, tool_name, action, status, correlation_id, idempotency_key, tool_use_id, action_digest, input_redacted)
           VALUES (gen_random_uuid(), $1, $2, 's', 't', 'a', 'succeeded', 'c', $3, $3, 'd', '{}')`,
          [org, run, `k${n}`],
        );
      await insert(1);
      // The migration's work, its transaction held open as a long build on a large ledger holds it.
      await qr.startTransaction();
      await new ToolUseOncePerRun1765710000000().up(qr);
      // Its own lock, taken before the marking (the index build's SHARE lock comes only after it): writes wait throughout.
      const modes = (await other.query(
        `SELECT l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'tool_calls' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND l.granted AND l.pid <> pg_backend_pid() ORDER BY l.mode`,
      )) as { rows: { mode: string }[] };
      expect(modes.rows.map((r) => r.mode)).toContain('ShareRowExclusiveLock');
      await other.query(`SET lock_timeout = '300ms'`);
      expect(((await other.query('SELECT count(*)::int AS n FROM tool_calls')) as { rows: { n: number }[] }).rows[0].n).toBe(1);
      await expect(insert(2)).rejects.toMatchObject({ code: '55P03' }); // lock_timeout: the write waited
      await qr.commitTransaction();
      await insert(3);
    } finally {
      if (qr.isTransactionActive) await qr.rollbackTransaction();
      await qr.release();
      await other.end();
      await scratch.destroy();
      await db.drop();
    }
  });
});

describe('migrations run without a statement timeout', () => {
  let seen: string | undefined;
  class ProbeStatementTimeout1799999999999 implements MigrationInterface {
    name = 'ProbeStatementTimeout1799999999999';
    async up(q: QueryRunner): Promise<void> {
      seen = ((await q.query('SHOW statement_timeout')) as { statement_timeout: string }[])[0].statement_timeout;
    }
    async down(): Promise<void> {}
  }

  it('a migration run by runMigrations on the migrator data source (as createGateway and migrate run build it) sees statement_timeout 0', async () => {
    // The migrations run on a pooled connection (the one holding the lock): the pool itself must carry the setting.
    const ds = await new DataSource({ ...migratorOptions(process.env.DATABASE_URL!), migrations: [...MIGRATIONS, ProbeStatementTimeout1799999999999] }).initialize();
    try {
      await runMigrations(ds);
      await ds.undoLastMigration({ transaction: 'each' });
    } finally {
      await ds.destroy();
    }
    expect(seen).toBe('0');
    // The request pools keep theirs.
    expect((dbOptions('postgres://x@h/db').extra as { statement_timeout: number }).statement_timeout).toBe(15_000);
  });
});

describe('migration:check (built dist/)', () => {
  it('an empty DATABASE_URL (as .env.example ships it) means unset: the check runs on its own embedded database', async () => {
    const cli = fileURLToPath(new URL('../../dist/src/cli/migrate.js', import.meta.url));
    const run = promisify(execFile);
    const { stdout, stderr } = await run(process.execPath, [cli, 'check'], { env: { ...process.env, DATABASE_URL: '' }, timeout: 120_000 });
    appendToRunLog('child CLI migrate.js check stdout', stdout); // the run-wide leak scan reads them
    appendToRunLog('child CLI migrate.js check stderr', stderr);
    expect(stderr).not.toMatch(/user name|ECONNREFUSED/);
    expect(stdout).toMatch(/^no drift: \d+ migration\(s\) apply, revert and re-apply/); // execFile rejects on a non-zero exit
  }, 150_000);
});

describe('start-up migrations in a schema of its own (search_path)', () => {
  it("a gateway whose search_path names a fresh schema before another gateway's migrated public migrates its own", async () => {
    // Pending migrations are looked for where TypeORM keeps its table, current_schema(): looked for along the whole
    // path, the other gateway's table in public was found, nothing seemed pending, nothing was created in tg_b, and
    // every unqualified query then read and wrote public's tables (session review).
    const db = await createScratchDatabase('tg_migrate_schema');
    try {
      const first = await new DataSource(migratorOptions(db.url)).initialize(); // gateway A, in public
      try {
        await runMigrations(first);
        await first.query('CREATE SCHEMA tg_b');
      } finally {
        await first.destroy();
      }
      const u = new URL(db.url);
      u.searchParams.set('options', '-c search_path=tg_b,public');
      const b = await new DataSource(migratorOptions(u.toString())).initialize();
      try {
        expect((await pendingMigrations(b)).length).toBe(MIGRATIONS.length);
        await runMigrations(b); // createGateway's step for gateway B
        const [{ orgs }] = (await b.query(`SELECT n.nspname AS orgs FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass('orgs')`)) as { orgs: string }[];
        expect(orgs).toBe('tg_b');
        expect(await pendingMigrations(b)).toEqual([]);
      } finally {
        await b.destroy();
      }
    } finally {
      await db.drop();
    }
  });
});
