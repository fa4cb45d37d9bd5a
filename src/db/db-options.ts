import type { DataSourceOptions } from 'typeorm';
import { MIGRATIONS } from '../../migrations/index.js';
import { userStartupOptions, withSearchParam } from './database-url.js';
import { ENTITIES } from './entities.js';
import { QueryTimeoutClient } from './pg-client.js';
import { DEFAULT_QUERY_TIMEOUT_MS, statementTimeoutFor, type DbConnectionMode } from './session-settings.js';

/**
 * `queryTimeoutMs` 0: no client-side query timeout, and no server-side statement timeout either (migrations: an
 * index build over a large ledger rightly takes longer than any request; they run on a pooled connection, the one
 * holding the migration lock, so the pool itself must carry the setting).
 *
 * `connectionMode` 'pooled' (DB_CONNECTION_MODE): none of the settings is sent — no `options` of ours, no timeouts —
 * for a pooler that refuses them (RDS Proxy); the role or database sets them, and start-up checks (database-probe.ts).
 * Migrations are not run through a pooler (runMigrations), so the migrator's "no timeout" is not needed there.
 */
export function dbOptions(url: string, poolSize = 20, queryTimeoutMs = DEFAULT_QUERY_TIMEOUT_MS, connectionMode: DbConnectionMode = 'direct'): DataSourceOptions {
  const sent = connectionMode === 'direct';
  // pg sends statement_timeout and idle_in_transaction_session_timeout only when they are not 0: the migrator's 0
  // ("none") is sent here, or a database's own ALTER DATABASE … SET statement_timeout would cancel a long migration.
  const session = sent
    ? withSessionSettings(url, queryTimeoutMs === 0 ? [...PINNED_SETTINGS, 'statement_timeout=0', 'idle_in_transaction_session_timeout=0'] : PINNED_SETTINGS)
    : { url, options: undefined };
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
      // statements of whatever next used the connection. The server ends it. 0 (migrations): no limit.
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
 * The data source migrations run on (start-up, `migration:run`, `migration:check`): two connections (the lock's, which
 * the migrations run on, and one for the looks before and after), no client-side query timeout and no statement timeout. One definition, so none of them drifts back
 * to a request pool's 15 s statement timeout.
 */
export function migratorOptions(url: string, connectionMode: DbConnectionMode = 'direct'): DataSourceOptions {
  return dbOptions(url, 2, 0, connectionMode);
}
