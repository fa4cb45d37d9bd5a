import type { DataSourceOptions } from 'typeorm';
import { MIGRATIONS } from '../../migrations/index.js';
import { ENTITIES } from './entities.js';

export function dbOptions(url: string, poolSize = 20): DataSourceOptions {
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
      statement_timeout: 15_000,
      idleTimeoutMillis: 30_000,
      application_name: 'tool-gateway',
    },
  };
}
