import 'reflect-metadata';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { MIGRATIONS } from '../../migrations/index.js';
import { MigrationsPendingBehindPooler, runMigrations } from '../bootstrap.js';
import { projectRoot } from '../common/project-root.js';
import { CONFIG_SCHEMA, databaseEnvProblem } from '../config/config.schema.js';
import { migratorOptions } from '../db/db-options.js';
import { withDatabaseName } from '../db/database-url.js';
import { pendingMigrations } from '../db/pending-migrations.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../db/embedded-postgres.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { poolerHint } from '../db/database-probe.js';

/* eslint-disable no-console -- a command-line tool talks on stdout */

const PG_TYPES: Record<string, string> = {
  uuid: 'uuid',
  text: 'text',
  boolean: 'boolean',
  integer: 'integer',
  bigint: 'bigint',
  jsonb: 'jsonb',
  timestamptz: 'timestamp with time zone',
  bytea: 'bytea',
};

/** Entities vs the schema the migrations build: every mapped column exists with the same type and nullability. */
export async function schemaDrift(ds: DataSource): Promise<string[]> {
  const problems: string[] = [];
  const cols = (await ds.query(
    `SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = current_schema()`,
  )) as { table_name: string; column_name: string; data_type: string; is_nullable: string }[];
  const byTable = new Map<string, Map<string, { type: string; nullable: boolean }>>();
  for (const c of cols) {
    if (!byTable.has(c.table_name)) byTable.set(c.table_name, new Map());
    byTable.get(c.table_name)!.set(c.column_name, { type: c.data_type, nullable: c.is_nullable === 'YES' });
  }
  for (const meta of ds.entityMetadatas) {
    const table = byTable.get(meta.tableName);
    if (!table) {
      problems.push(`table ${meta.tableName} (entity ${meta.name}) is not created by any migration`);
      continue;
    }
    for (const col of meta.columns) {
      const db = table.get(col.databaseName);
      const want = PG_TYPES[String(col.type)] ?? String(col.type);
      if (!db) problems.push(`${meta.tableName}.${col.databaseName} is mapped but missing in the database`);
      else if (db.type !== want) problems.push(`${meta.tableName}.${col.databaseName}: entity type ${want}, database ${db.type}`);
      else if (db.nullable !== col.isNullable) problems.push(`${meta.tableName}.${col.databaseName}: nullability differs (entity ${col.isNullable})`);
    }
    for (const name of table.keys()) {
      if (!meta.columns.some((c) => c.databaseName === name)) problems.push(`${meta.tableName}.${name} exists in the database but no entity maps it`);
    }
  }
  const files = readdirSync(join(projectRoot(), 'migrations')).filter((f) => /^\d+-.*\.ts$/.test(f));
  if (files.length !== MIGRATIONS.length) problems.push(`migrations/ has ${files.length} migration files but index.ts lists ${MIGRATIONS.length}`);
  return problems;
}

async function withServer<T>(given: string | undefined, fn: (serverUrl: string) => Promise<T>): Promise<T> {
  let embedded: EmbeddedPostgres | undefined;
  const url = given ?? // empty (as .env.example ships it) means unset, as for the gateway
    (embedded = await startEmbeddedPostgres(`.tmp/pg-migrate-${process.pid}`, { persistent: false, fast: true })).url;
  try {
    return await fn(url);
  } finally {
    await embedded?.stop();
  }
}

/** Exit codes: 0 done (show: none pending), 1 show: migrations pending / run, check: failed or drift, 2 usage or configuration error, 3 show: could not read the database. */
const USAGE = 'usage: migrate run | show | check';

async function main(cmd: string | undefined): Promise<number> {
  if (cmd !== 'run' && cmd !== 'show' && cmd !== 'check') {
    console.error(USAGE);
    return 2;
  }
  const problem = databaseEnvProblem(process.env);
  if (problem) {
    console.error(problem);
    return 2;
  }
  const mode = CONFIG_SCHEMA.DB_CONNECTION_MODE.parse(process.env.DB_CONNECTION_MODE);
  // As the gateway reads it: without the spaces or newline around it; only spaces is unset.
  const given = CONFIG_SCHEMA.DATABASE_URL.parse(process.env.DATABASE_URL);
  if (cmd === 'run' || cmd === 'show') {
    const url = given;
    if (!url) {
      console.error('DATABASE_URL is required (the gateway migrates its embedded database itself at start-up)');
      return 2;
    }
    // No query or statement timeout (migrations may run long), unless DB_CONNECTION_MODE=pooled: the role's then.
    const ds = await new DataSource(migratorOptions(url, mode)).initialize();
    try {
      if (cmd === 'run') {
        let applied: string[];
        try {
          applied = await runMigrations(ds, {
            pooled: mode === 'pooled',
            // Said, not waited for in silence: another replica migrating, or a lock a pooler left held (README).
            onWaiting: () => console.error('waiting for the migration lock: another gateway or migration:run is migrating the database (or a connection pooler left it held: see README "Running against your own PostgreSQL")'),
          });
        } catch (err) {
          if (!(err instanceof MigrationsPendingBehindPooler)) throw err;
          console.error(err.message); // a configuration error: run against the server itself
          return 2;
        }
        if (applied.length > 0) console.log(`applied ${applied.length} migration(s):\n${applied.map((name) => `  - ${name}`).join('\n')}`);
        console.log('migrations are up to date');
        return 0;
      }
      // Exit 1 with migrations pending, so a deploy script can check before it starts anything.
      const pending = await pendingMigrations(ds);
      if (pending.length === 0) {
        console.log('no pending migrations');
        return 0;
      }
      console.log(`${pending.length} pending migration(s):\n${pending.map((name) => `  - ${name}`).join('\n')}`);
      return 1;
    } finally {
      await ds.destroy();
    }
  }
  return withServer(given, async (serverUrl) => {
    const dbName = `tg_drift_${process.pid}`;
    // Before anything is created: the URL of the scratch database (a socket form's too).
    const url = withDatabaseName(serverUrl, dbName);
    const admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    let ds: DataSource | undefined;
    try {
      ds = await new DataSource(migratorOptions(url, mode)).initialize();
      await runMigrations(ds);
      // Down then up again: every migration must be reversible.
      for (let i = 0; i < MIGRATIONS.length; i++) await ds.undoLastMigration({ transaction: 'each' });
      await runMigrations(ds);
      const problems = await schemaDrift(ds);
      if (problems.length) {
        console.error(`schema drift:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
        return 1;
      }
      console.log(`no drift: ${MIGRATIONS.length} migration(s) apply, revert and re-apply; every entity matches the schema`);
      return 0;
    } finally {
      await ds?.destroy();
      await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      await admin.end();
    }
  });
}

const cmd = process.argv[2];
main(cmd).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`migrate failed: ${loggableErrorText(err)}${poolerHint(err)}`);
    // show's 1 means "migrations pending": a deploy script must not read an unreachable database as that.
    process.exit(cmd === 'show' ? 3 : 1);
  },
);
