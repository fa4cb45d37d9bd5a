import type { DataSourceOptions } from 'typeorm';
import { MIGRATIONS } from '../../migrations/index.js';
import { ENTITIES } from './entities.js';

/**
 * `queryTimeoutMs` 0: no client-side query timeout, and no server-side statement timeout either (migrations: an
 * index build over a large ledger rightly takes longer than any request; TypeORM runs them on a pooled connection
 * of its own choosing, so the pool itself must carry the setting).
 */
export function dbOptions(url: string, poolSize = 20, queryTimeoutMs = 20_000): DataSourceOptions {
  return {
    type: 'postgres',
    url,
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
      statement_timeout: queryTimeoutMs === 0 ? 0 : 15_000,
      // A database that stops answering without closing the connection (a network partition, a frozen host)
      // never triggers statement_timeout, which runs on the server: the client gives up after this, and the
      // pool drops that connection. Longer than statement_timeout by default, so a slow statement is the
      // server's to end (DB_QUERY_TIMEOUT_MS).
      query_timeout: queryTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      idleTimeoutMillis: 30_000,
      application_name: 'tool-gateway',
    },
  };
}

/**
 * The data source migrations run on (start-up, `migration:run`, `migration:check`): two connections (the lock's and
 * TypeORM's own), no client-side query timeout and no statement timeout. One definition, so none of them drifts back
 * to a request pool's 15 s statement timeout.
 */
export function migratorOptions(url: string): DataSourceOptions {
  return dbOptions(url, 2, 0);
}
