import { MigrationExecutor, type DataSource, type Migration, type MigrationInterface, type QueryRunner } from 'typeorm';

/**
 * How long a migration's statement waits for a table lock before it gives up (SQLSTATE 55P03) and the run is tried
 * again later (runMigrations). PostgreSQL queues every later query of a table behind a lock request waiting there: an
 * ADD COLUMN queued behind a long reader (a pg_dump, a report) stalled every read of tool_calls by the replicas of
 * the previous release, still serving, until their statement timeouts answered 503.
 */
export const MIGRATION_LOCK_TIMEOUT_MS = 2_000;

/**
 * TypeORM's executor, run on the connection `queryRunner` (the one holding the migration lock: runMigrations), each
 * migration in a transaction of its own (`transaction: 'each'`, as ds.runMigrations was given), and each transaction
 * begun with `SET LOCAL lock_timeout`: every migration's lock waits are bounded, the ones already released included,
 * without each migration saying so. A migration with `transaction = false` runs outside one (FiniteTimes1766400000000:
 * its own short transactions, so it never holds one table's lock while it waits for another's), under a session
 * lock_timeout reset after it.
 * `running` names the migration whose up or down is under way, for the error when a lock is not had in time.
 */
export class LockBoundedMigrationExecutor extends MigrationExecutor {
  running: string | undefined;

  constructor(dataSource: DataSource, queryRunner: QueryRunner, private readonly lockTimeoutMs = MIGRATION_LOCK_TIMEOUT_MS) {
    super(dataSource, queryRunner);
    this.transaction = 'each';
  }

  protected override getMigrations(): Migration[] {
    return super.getMigrations().map((m) => {
      if (m.instance) m.instance = this.bounded(m.name, m.instance);
      return m;
    });
  }

  /** `original` with its up and down begun by the lock timeout; its name and `transaction` as they were. */
  private bounded(name: string, original: MigrationInterface): MigrationInterface {
    const run = async (q: QueryRunner, step: (q: QueryRunner) => Promise<unknown>): Promise<void> => {
      this.running = name;
      const timeout = `'${Math.max(1, Math.trunc(this.lockTimeoutMs))}ms'`;
      // SET LOCAL: it ends with the migration's transaction, and the connection goes back to the pool as it came.
      if (q.isTransactionActive) {
        await q.query(`SET LOCAL lock_timeout = ${timeout}`);
        await step(q);
      } else {
        // A migration with `transaction = false` (its own short transactions, one table's lock at a time): the session's,
        // for its statements, then reset to what the connection had.
        await q.query(`SET lock_timeout = ${timeout}`);
        try {
          await step(q);
        } finally {
          await q.query('RESET lock_timeout').catch(() => undefined);
        }
      }
      this.running = undefined;
    };
    const wrapped = Object.create(original) as MigrationInterface;
    wrapped.up = (q) => run(q, (r) => original.up(r));
    wrapped.down = (q) => run(q, (r) => original.down(r));
    return wrapped;
  }
}

/** A statement that gave up waiting for a lock (lock_timeout). */
export function isLockTimeout(err: unknown): err is Error & { code: string; query?: string } {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '55P03';
}

/**
 * The sessions in this database holding locks on the schema's tables whose transactions are older than
 * `olderThanMs`: what a migration that gave up on a lock most likely waited for, as an operator would look for it in
 * pg_locks and pg_stat_activity (pid, application, state, age, tables; never the query text, which may hold values).
 */
export async function longLockHolders(q: QueryRunner, olderThanMs: number): Promise<string[]> {
  const rows = (await q.query(
    `SELECT a.pid, a.application_name AS app, a.state, floor(extract(epoch FROM now() - a.xact_start))::int AS secs,
            string_agg(DISTINCT c.relname, ', ' ORDER BY c.relname) AS tables
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid JOIN pg_class c ON c.oid = l.relation
      WHERE l.granted AND l.pid <> pg_backend_pid() AND c.relkind IN ('r', 'p')
        -- pg_locks is the server's: a copy of this database (CREATE DATABASE … TEMPLATE) has its tables' oids
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND c.relnamespace = to_regnamespace(quote_ident(current_schema()))
        AND a.xact_start < now() - make_interval(secs => $1::float8 / 1000)
      GROUP BY a.pid, a.application_name, a.state, a.xact_start
      ORDER BY a.xact_start LIMIT 5`,
    [olderThanMs],
  )) as { pid: number; app: string; state: string | null; secs: number; tables: string }[];
  return rows.map((r) => `pid ${r.pid} (${r.app ? `application ${JSON.stringify(r.app)}, ` : ''}${r.state ?? 'state unknown'}, transaction open ${r.secs} s, on ${r.tables})`);
}
