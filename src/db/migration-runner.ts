/**
 * Running and reverting the migrations under the migration lock: start-up (bootstrap.ts) and the migrate CLI. Apart
 * from the app (TypeORM and the migrations only), so the CLI does not load Nest and every module to migrate.
 */
import { DataSource, type QueryRunner } from 'typeorm';
import { pendingMigrations } from './pending-migrations.js';
import { isDeadlock } from '../common/errors/database-errors.js';
import { isLockTimeout, LockBoundedMigrationExecutor, longLockHolders, MIGRATION_LOCK_TIMEOUT_MS } from './migration-executor.js';

const MIGRATION_LOCK = 7_413_920_552;

/** How often a replica asks again for the lock another one holds while it migrates. */
const LOCK_RETRY_MS = 500;

/** Runs of the migrations that gave up on a table lock (MIGRATION_LOCK_TIMEOUT_MS) before start-up fails: 5. */
const TABLE_LOCK_ATTEMPTS = 5;

/** The pause between those runs, the migration lock kept (the other replicas go on waiting, rather than try too). */
const TABLE_LOCK_PAUSE_MS = 5_000;

export interface MigrationWait {
  /** DB_CONNECTION_MODE=pooled: pending migrations are not run (MigrationsPendingBehindPooler). */
  pooled?: boolean;
  /** Asked between tries for the lock: true gives up the wait (a stop during start-up) with MigrationsStopped. */
  stopRequested?: () => boolean;
  /** Called once, when the lock is found held by another replica. */
  onWaiting?: () => void;
  /** A migration gave up waiting for a table lock and is tried again after a pause: the line says what holds it. */
  onTableLockWait?: (line: string) => void;
  /** How long each migration's statements wait for a table lock (MIGRATION_LOCK_TIMEOUT_MS). */
  tableLockTimeoutMs?: number;
  /** Runs of the migrations that may give up on a table lock before MigrationTableLockTimeout (TABLE_LOCK_ATTEMPTS). */
  tableLockAttempts?: number;
  /** The pause between those runs (TABLE_LOCK_PAUSE_MS). */
  tableLockPauseMs?: number;
}

/**
 * Migrations pending with DB_CONNECTION_MODE=pooled: not run through the pooler. The migration lock is a session-level
 * advisory lock, which a transaction-mode pool cannot hold: taken through PgBouncer, two replicas starting together on
 * an empty database both got it (both lock attempts ran on the server connection that held it already), one crashed
 * on "relation already exists", and the lock stayed on an idle server connection, so a later upgrade's
 * `migration:run` against the server waited for it without a word.
 */
export class MigrationsPendingBehindPooler extends Error {
  override readonly name = 'MigrationsPendingBehindPooler';
  constructor(readonly pending: string[]) {
    super(
      `${pending.length} database migration(s) pending (${pending.join(', ')}), and DB_CONNECTION_MODE=pooled: they are not run through a connection ` +
        'pooler, which cannot hold the lock that keeps replicas from migrating at once. Run them against PostgreSQL itself first ' +
        '(DATABASE_URL=<the server, not the pooler> DB_CONNECTION_MODE=direct npm run migration:run), then start the gateway',
    );
  }
}

/** Start-up was asked to stop while it waited for another replica's migrations: nothing ran, nothing is held. */
export class MigrationsStopped extends Error {
  constructor() {
    super('stopped while waiting for another replica to finish migrating');
  }
}

/**
 * A migration gave up on a table lock at every try (MigrationWait.tableLockAttempts): it was rolled back each time,
 * and nothing of it is applied. Another session kept a lock on the table that long: a long transaction, a dump.
 */
export class MigrationTableLockTimeout extends Error {
  override readonly name = 'MigrationTableLockTimeout';
  constructor(readonly migration: string | undefined, attempts: number, timeoutMs: number, holders: string[]) {
    super(
      // The cure before the list: a fatal line keeps only the head of a long message (loggableErrorText).
      `migration ${migration ?? '(unknown)'} could not take a table lock within ${timeoutMs} ms, ${attempts} time(s), and was rolled back each time ` +
        '(nothing of it is applied): let the sessions holding locks on its tables finish, or end them (pg_stat_activity, pg_terminate_backend), ' +
        `then start again; ${holders.length ? `holding locks now: ${holders.join('; ')}` : 'no long transaction holds a lock now'}`,
    );
  }
}

/**
 * The database lacks what this release's code needs though every migration is recorded as applied in
 * typeorm_migrations: a migration's `down` run by hand (its row left there), or a table changed outside the
 * migrations. Served on, a resend of a tool_use was answered 500, and under another key ran again at its vendor.
 */
export class SchemaIncomplete extends Error {
  override readonly name = 'SchemaIncomplete';
  constructor(readonly missing: string[]) {
    super(
      'the database schema lacks what this release needs, though typeorm_migrations records every migration as applied ' +
        '(a migration reverted by hand leaves its row there: DELETE FROM typeorm_migrations WHERE name IN (...) the ones reverted, ' +
        `and start again to apply them again); missing: ${missing.join('; ')}`,
    );
  }
}

/**
 * Runs `work` holding the migration lock, on the connection that holds it: a second replica waits for it (polling),
 * and the work is never on another connection, so the session holding the lock is the one doing the work (pg_locks
 * shows it active, not an idle session an operator might end as a lock a pooler left), and a session that ends
 * (idle_session_timeout, a network reset, pg_terminate_backend) rolls back the work with the lock.
 */
async function underMigrationLock<T>(ds: DataSource, wait: MigrationWait, work: (qr: QueryRunner) => Promise<T>): Promise<T> {
  const qr = ds.createQueryRunner();
  await qr.connect();
  let locked = false;
  // Nothing is SET on the lock's connection for the session: the wait polls (each poll answers at once), and the
  // migrations' lock_timeout is SET LOCAL, in their own transactions (LockBoundedMigrationExecutor).
  try {
    for (let waited = false; ; waited = true) {
      const [{ acquired }] = (await qr.query('SELECT pg_try_advisory_lock($1) AS acquired', [MIGRATION_LOCK])) as { acquired: boolean }[];
      if (acquired) break;
      if (!waited) wait.onWaiting?.();
      if (wait.stopRequested?.()) throw new MigrationsStopped();
      await new Promise((r) => setTimeout(r, LOCK_RETRY_MS));
      if (wait.stopRequested?.()) throw new MigrationsStopped();
    }
    locked = true;
    return await work(qr);
  } finally {
    // A lock not released (its session in an aborted transaction, the statement cut off) stays with the session:
    // back in the pool, it made every other replica wait for it for as long as this process lived. Its connection
    // is closed instead, and the lock ends with the session.
    const unreleased = locked ? await unlock(qr) : undefined;
    await (qr as unknown as ReleasableRunner).releasePostgresConnection(unreleased);
  }
}

/** TypeORM's PostgresQueryRunner release, given an error: the pool then closes the connection instead of keeping it. */
interface ReleasableRunner {
  releasePostgresConnection(err?: Error): Promise<void>;
}

/** Undefined once the migration lock is released on `qr`'s session, else why not. */
async function unlock(qr: QueryRunner): Promise<Error | undefined> {
  try {
    const [{ released }] = (await qr.query('SELECT pg_advisory_unlock($1) AS released', [MIGRATION_LOCK])) as { released: boolean }[];
    return released ? undefined : new Error('the migration lock was not held by its session');
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

/**
 * `step` (a run or a revert) by a LockBoundedMigrationExecutor on `qr`, tried again after a pause when a migration
 * gave up on a table lock (it was rolled back; those before it stay applied), at most tableLockAttempts times, each
 * wait said (onTableLockWait) with the sessions most likely holding the lock; then MigrationTableLockTimeout.
 */
async function withTableLockRetries<T>(ds: DataSource, qr: QueryRunner, wait: MigrationWait, step: (executor: LockBoundedMigrationExecutor) => Promise<T>): Promise<T> {
  const timeoutMs = wait.tableLockTimeoutMs ?? MIGRATION_LOCK_TIMEOUT_MS;
  const attempts = Math.max(1, wait.tableLockAttempts ?? TABLE_LOCK_ATTEMPTS);
  const pauseMs = wait.tableLockPauseMs ?? TABLE_LOCK_PAUSE_MS;
  for (let attempt = 1; ; attempt++) {
    const executor = new LockBoundedMigrationExecutor(ds, qr, timeoutMs);
    try {
      return await step(executor);
    } catch (err) {
      // A deadlock with the previous release's traffic rolled the migration back whole, as a lock timeout does: tried again.
      const deadlock = isDeadlock(err);
      if (!deadlock && !isLockTimeout(err)) throw err;
      const holders = await longLockHolders(qr, timeoutMs).catch(() => []);
      if (attempt >= attempts) throw new MigrationTableLockTimeout(executor.running, attempts, timeoutMs, holders);
      const { query } = err as { query?: unknown };
      const statement = typeof query === 'string' ? `: ${query.replace(/\s+/g, ' ').trim().slice(0, 120)}` : '';
      const what = deadlock ? 'lost a deadlock with another session' : `waited ${timeoutMs} ms for a table lock`;
      wait.onTableLockWait?.(
        `migration ${executor.running ?? '(unknown)'} ${what} and was rolled back (try ${attempt} of ${attempts})${statement}; ` +
          `${holders.length ? `held by ${holders.join('; ')}` : 'no long transaction holds a lock now'}; trying again in ${pauseMs >= 1_000 ? `${Math.round(pauseMs / 1_000)} s` : `${pauseMs} ms`}`,
      );
      if (wait.stopRequested?.()) throw new MigrationsStopped();
      await new Promise((r) => setTimeout(r, pauseMs));
      if (wait.stopRequested?.()) throw new MigrationsStopped();
    }
  }
}

/**
 * Runs pending migrations once even when several replicas start together: the
 * others wait for the advisory lock for as long as the first one migrates. The
 * wait polls rather than blocks in pg_advisory_lock, so no statement of it
 * outlasts a statement timeout (an index build on a large table outlasts the
 * pool's), and a stop asked for meanwhile is carried out at once instead of
 * once the other replica is done. The migrations run on the lock's connection
 * (underMigrationLock), each in a transaction of its own with a bounded wait for
 * its table locks (withTableLockRetries). Answers the names of the migrations it ran (none: []).
 */
export async function runMigrations(ds: DataSource, wait: MigrationWait = {}): Promise<string[]> {
  // None pending (every start but an upgrade's): no lock is taken, nothing is set. A session-level lock taken and
  // released at every start was what a transaction-mode pooler (PgBouncer) could leave held on a server connection
  // another client then had, so that later start-ups waited for it; and no replica now queues behind another's start.
  const pending = await pendingMigrations(ds);
  if (pending.length === 0) return [];
  if (wait.pooled) throw new MigrationsPendingBehindPooler(pending);
  return underMigrationLock(ds, wait, (qr) =>
    // Pending is read again under the lock, by the executor: another replica may have applied them meanwhile.
    withTableLockRetries(ds, qr, wait, async (executor) => (await executor.executePendingMigrations()).map((m) => m.name)),
  );
}

/**
 * Reverts migration `name` (its `down`, and its row in typeorm_migrations, in one transaction) when it is the last
 * one applied, under the migration lock and as runMigrations runs them: `migrate revert`. Answers the last applied
 * migration as found under the lock (undefined: none), and whether it was `name` and so reverted; the name is
 * checked there, so a migration applied by another process meanwhile is not the one reverted.
 */
export async function revertMigration(ds: DataSource, name: string, wait: MigrationWait = {}): Promise<{ last: string | undefined; reverted: boolean }> {
  return underMigrationLock(ds, wait, (qr) =>
    withTableLockRetries(ds, qr, wait, async (executor) => {
      const [last] = await executor.getExecutedMigrations(); // latest first (by id), the one undoLastMigration takes
      if (last?.name !== name) return { last: last?.name, reverted: false };
      await executor.undoLastMigration();
      return { last: name, reverted: true };
    }),
  );
}
