import type { DataSourceOptions } from 'typeorm';
import { MIGRATIONS } from '../../migrations/index.js';
import { userStartupOptions, withSearchParam } from './database-url.js';
import { ENTITIES } from './entities.js';
import { QueryTimeoutClient } from './pg-client.js';
import { DEFAULT_QUERY_TIMEOUT_MS, statementTimeoutFor, type DbConnectionMode } from './session-settings.js';

/**
 * `queryTimeoutMs` 0: no client-side query timeout, and no server-side statement timeout either (migrations: an
 * index build over a large ledger rightly takes longer than any request; they run on a pooled connection, the one
 * holding the migration lock, so the pool itself must carry the setting), but a bounded idle transaction
 * (`migratorIdleMs`, migratorSettings).
 *
 * `connectionMode` 'pooled' (DB_CONNECTION_MODE): none of the settings is sent — no `options` of ours, no timeouts —
 * for a pooler that refuses them (RDS Proxy); the role or database sets them, and start-up checks (database-probe.ts).
 * Migrations are not run through a pooler (runMigrations), so the migrator's "no timeout" is not needed there.
 */
export function dbOptions(
  url: string,
  poolSize = 20,
  queryTimeoutMs = DEFAULT_QUERY_TIMEOUT_MS,
  connectionMode: DbConnectionMode = 'direct',
  migratorIdleMs = MIGRATOR_IDLE_IN_TRANSACTION_MS,
): DataSourceOptions {
  const sent = connectionMode === 'direct';
  // pg sends statement_timeout and idle_in_transaction_session_timeout only when they are not 0: the migrator's are
  // sent here, or a database's own ALTER DATABASE … SET statement_timeout would cancel a long migration.
  const session = sent ? withSessionSettings(url, queryTimeoutMs === 0 ? [...PINNED_SETTINGS, ...migratorSettings(migratorIdleMs)] : PINNED_SETTINGS) : { url, options: undefined };
  return {
    type: 'postgres',
    url: session.url,
    entities: ENTITIES,
    migrations: MIGRATIONS,
    migrationsTableName: 'typeorm_migrations',
    synchronize: false,
    migrationsRun: false,
    logging: false,
    extra: {
      max: poolSize,
      // Fail fast while the database is down so callers get 503, not a hang.
      connectionTimeoutMillis: 3_000,
      ...(sent ? { statement_timeout: statementTimeoutFor(queryTimeoutMs) } : {}),
      // A database that stops answering without closing the connection (a network partition, a frozen host)
      // never triggers statement_timeout, which runs on the server: the client gives up after this, and
      // QueryTimeoutClient closes that connection, whichever path ran the statement. Always longer than
      // statement_timeout (statementTimeoutFor), so a slow statement is the server's to end, and a statement
      // the client gave up on has not gone on to commit.
      query_timeout: queryTimeoutMs,
      Client: QueryTimeoutClient,
      // The gateway's transactions pause between statements only for work in this process: one left idle longer
      // than the client waits for any answer is one it lost track of, and would hold its locks and swallow the
      // statements of whatever next used the connection. The server ends it. Migrations: migratorSettings.
      ...(sent ? { idle_in_transaction_session_timeout: queryTimeoutMs } : {}),
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      idleTimeoutMillis: 30_000,
      application_name: 'tool-gateway',
      ...(session.options === undefined ? {} : { options: session.options }),
    },
  };
}

/**
 * Session settings the code is written for, pinned on every connection whatever the server, the database or the role
 * sets (postgresql.conf, ALTER DATABASE … SET, ALTER ROLE … SET — a shop's own PostgreSQL often has some): a client's
 * startup options come after those. DateStyle: the driver reads only ISO timestamps, and any other style read every
 * timestamp as null (500s; a new API key stored but its answer lost). default_transaction_isolation: the
 * transactions are written for read committed; under repeatable read or serializable, concurrent calls failed with
 * serialization errors, and an executed call's outcome write among them (the call left `running`). IntervalStyle
 * and TimeZone: one reading of intervals and times on every server.
 */
const PINNED_SETTINGS = ['DateStyle=ISO', 'IntervalStyle=postgres', 'TimeZone=UTC', 'default_transaction_isolation=read\\ committed'];

/**
 * The startup `options` carrying `settings` (`-c name=value` each), after the user's own: the URL's `options`
 * parameter, or PGOPTIONS (which the driver would otherwise have sent). The driver lets the URL's parameter override
 * the config's, so when the URL has one, the settings are added to it there, and `options` is undefined.
 */
export function withSessionSettings(url: string, settings: readonly string[]): { url: string; options: string | undefined } {
  const ours = settings.map((s) => `-c ${s}`).join(' ');
  const theirs = userStartupOptions(url);
  if (theirs?.from !== 'url') return { url, options: [theirs?.value, ours].filter(Boolean).join(' ') };
  return { url: withSearchParam(url, 'options', `${theirs.value} ${ours}`), options: undefined };
}

/**
 * How long a migration's transaction may sit idle before the server ends it (rolled back, its session and with it the
 * migration lock gone). A migration pauses between its statements only for this process's own work (milliseconds; the
 * 5 s pause before a retry comes after the rollback), so a transaction idle this long is one whose client was lost
 * without the server hearing of it — its host gone, a network partition, a dropped NAT entry. Without a bound it held
 * the table locks it had taken (every call recorded waiting, then 503) and the migration lock (every replica starting,
 * and any re-run, waiting) until the server's TCP keepalive gave up: two hours by the OS default.
 */
export const MIGRATOR_IDLE_IN_TRANSACTION_MS = 30_000;

/**
 * The migrator's own session settings: no statement timeout (an index build over a large ledger rightly outlasts any
 * request), a bounded idle transaction (MIGRATOR_IDLE_IN_TRANSACTION_MS), and the server's TCP keepalive probing an
 * idle client after 30 s, every 10 s, 3 times, so a session lost between two migrations (still holding the migration
 * lock, in no transaction) ends within about a minute. The keepalive settings do nothing on a Unix socket.
 */
function migratorSettings(idleMs: number): string[] {
  return ['statement_timeout=0', `idle_in_transaction_session_timeout=${idleMs}`, 'tcp_keepalives_idle=30', 'tcp_keepalives_interval=10', 'tcp_keepalives_count=3'];
}

/**
 * The data source migrations run on (start-up, `migration:run`, `migration:check`): two connections (the lock's, which
 * the migrations run on, and one for the looks before and after), no client-side query timeout and no statement timeout. One definition, so none of them drifts back
 * to a request pool's 15 s statement timeout.
 */
export function migratorOptions(url: string, connectionMode: DbConnectionMode = 'direct', idleInTransactionMs = MIGRATOR_IDLE_IN_TRANSACTION_MS): DataSourceOptions {
  return dbOptions(url, 2, 0, connectionMode, idleInTransactionMs);
}
