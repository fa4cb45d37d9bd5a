import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { MIGRATIONS } from '../../migrations/index.js';
import { MigrationsPendingBehindPooler, MigrationTableLockTimeout, revertMigration, runMigrations, type MigrationWait } from '../db/migration-runner.js';
import { projectRoot } from '../common/project-root.js';
import { CONFIG_SCHEMA, databaseEnvProblem } from '../config/config.schema.js';
import { migratorOptions } from '../db/db-options.js';
import { withDatabaseName } from '../db/database-url.js';
import { pendingMigrations } from '../db/pending-migrations.js';
import { schemaDrift } from '../db/schema-check.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../db/embedded-postgres.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { poolerHint } from '../db/database-probe.js';
import { PasswordSafeClient } from '../db/pg-client.js';

/* eslint-disable no-console -- a command-line tool talks on stdout */

/** Entities vs the schema the migrations build (schemaDrift's `exact`), and every migration file listed in index.ts. */
async function checkDrift(ds: DataSource): Promise<string[]> {
  const problems = await schemaDrift(ds, 'exact');
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

/**
 * Exit codes: 0 done (show: none pending), 1 show: migrations pending / run, revert, check: failed or drift, 2 usage or
 * configuration error, 3 show: could not read the database.
 */
const USAGE = 'usage: migrate run | show | check | revert <the name of the last migration applied>';

/** Said, not waited for in silence: another replica migrating, or a lock a pooler left held (README). */
const cliWait = (pooled: boolean): MigrationWait => ({
  pooled,
  onWaiting: () => console.error('waiting for the migration lock: another gateway or migration:run is migrating the database (or a connection pooler left it held: see README "Running against your own PostgreSQL")'),
  onTableLockWait: (line) => console.error(line),
});

/** The signal that stopped a `check` (its scratch database dropped first): the exit code is 128 + its number. */
let stoppedBy: NodeJS.Signals | undefined;
const signalExitCode = (signal: NodeJS.Signals): number => 128 + (signal === 'SIGINT' ? 2 : 15);

async function main(args: string[]): Promise<number> {
  const [cmd, arg] = args;
  // Exactly the words of one command: `revert <last> --dry-run` or `revert <last> <another>` reverted the first one
  // and exited 0; an option anywhere (-h, --help) is a request for the usage, never a migration's name.
  const known = cmd === 'run' || cmd === 'show' || cmd === 'check' || cmd === 'revert';
  if (!known || args.length !== (cmd === 'revert' ? 2 : 1) || args.some((a) => a.startsWith('-'))) {
    console.error(USAGE);
    return 2;
  }
  // The drift check compares the migration sources with index.ts: the production image ships dist/ only, and there
  // the check applied, reverted and re-applied every migration before failing on the missing folder.
  if (cmd === 'check' && !existsSync(join(projectRoot(), 'migrations'))) {
    console.error('check needs the sources (a checkout of the repository: it reads migrations/*.ts); nothing was done');
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
  if (cmd === 'run' || cmd === 'show' || cmd === 'revert') {
    const url = given;
    if (!url) {
      console.error('DATABASE_URL is required (the gateway migrates its embedded database itself at start-up)');
      return 2;
    }
    if (cmd === 'revert' && mode === 'pooled') {
      console.error('DB_CONNECTION_MODE=pooled: migrations are not reverted through a connection pooler, which cannot hold the migration lock. Revert against PostgreSQL itself (DATABASE_URL=<the server, not the pooler> DB_CONNECTION_MODE=direct)');
      return 2;
    }
    // No query or statement timeout (migrations may run long), unless DB_CONNECTION_MODE=pooled: the role's then.
    const ds = await new DataSource(migratorOptions(url, mode)).initialize();
    try {
      if (cmd === 'revert') return await revert(ds, arg!);
      if (cmd === 'run') {
        let applied: string[];
        try {
          applied = await runMigrations(ds, cliWait(mode === 'pooled'));
        } catch (err) {
          if (err instanceof MigrationTableLockTimeout) {
            console.error(err.message);
            return 1;
          }
          if (!(err instanceof MigrationsPendingBehindPooler)) throw err;
          console.error(err.message); // a configuration error: run against the server itself
          return 2;
        }
        if (applied.length > 0) console.log(`applied ${applied.length} migration(s):\n${applied.map((name) => `  - ${name}`).join('\n')}`);
        // What the gateway checks at start-up: a migration reverted by hand is still recorded, and is not applied again.
        const missing = await schemaDrift(ds, 'needed');
        if (missing.length > 0) {
          console.error(`every migration is recorded as applied, but the schema lacks what this release needs:\n${missing.map((m) => `  - ${m}`).join('\n')}\n` +
            'a migration reverted by hand leaves its row in typeorm_migrations: delete the rows of those reverted, then run again');
          return 1;
        }
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
    // Named by the process and 32 random bits: two checks on one server (containers, each its own pid 1) never meet on
    // one name, and the drop below is of this run's database only — never one another run (or a killed one) made.
    const dbName = `tg_drift_${process.pid}_${randomBytes(4).toString('hex')}`;
    // Before anything is created: the URL of the scratch database (a socket form's too).
    const url = withDatabaseName(serverUrl, dbName);
    // Its connection ended by the server (a DBA's pg_terminate_backend, a restart): the run fails in one line, not an
    // unhandled 'error' event with Node's stack trace, and the scratch database is dropped over a new connection.
    let adminLost: unknown;
    const admin = new PasswordSafeClient({ connectionString: serverUrl });
    admin.on('error', (err) => (adminLost ??= err));
    await admin.connect();
    // Sent: a drop follows it on the same connection, so a signal before its answer leaves nothing behind. Refused as
    // already there (42P04): not this run's, so not dropped.
    let createSent = false;
    let nameTaken = false;
    let ds: DataSource | undefined;
    let cleaning: Promise<void> | undefined;
    const cleanUp = (): Promise<void> =>
      (cleaning ??= (async () => {
        await ds?.destroy().catch(() => undefined);
        if (createSent && !nameTaken) await dropScratch(serverUrl, dbName, adminLost === undefined ? admin : undefined);
        else await admin.end().catch(() => undefined);
      })());
    // Ctrl-C or a CI runner's SIGTERM: the scratch database is not left on the server. Listened for before it is
    // created: a signal between its CREATE committing and the answer arriving killed the process and left it (the
    // drop after it waits for the CREATE on the same connection).
    const onSignal = (signal: NodeJS.Signals): void => {
      stoppedBy ??= signal;
      void cleanUp().finally(() => process.exit(signalExitCode(signal)));
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      createSent = true;
      await admin.query(`CREATE DATABASE ${dbName}`).catch((err: unknown) => {
        nameTaken = (err as { code?: unknown } | null)?.code === '42P04';
        throw err;
      });
      if (stoppedBy) return signalExitCode(stoppedBy);
      ds = await new DataSource(migratorOptions(url, mode)).initialize();
      await runMigrations(ds);
      // Down then up again: every migration must be reversible.
      for (let i = 0; i < MIGRATIONS.length; i++) await ds.undoLastMigration({ transaction: 'each' });
      await runMigrations(ds);
      const problems = await checkDrift(ds);
      if (adminLost !== undefined) throw adminLost;
      if (problems.length) {
        console.error(`schema drift:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
        return 1;
      }
      console.log(`no drift: ${MIGRATIONS.length} migration(s) apply, revert and re-apply; every entity matches the schema`);
      return 0;
    } finally {
      await cleanUp();
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  });
}

/** Drops `check`'s scratch database: over `admin` while it is connected, else (or if that fails) over a new connection. */
async function dropScratch(serverUrl: string, dbName: string, admin: pg.Client | undefined): Promise<void> {
  const drop = `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`;
  if (admin) {
    const dropped = await admin.query(drop).then(() => true, () => false);
    await admin.end().catch(() => undefined);
    if (dropped) return;
  }
  const fresh = new PasswordSafeClient({ connectionString: serverUrl });
  fresh.on('error', () => undefined); // a failure below is said by the query's rejection
  try {
    await fresh.connect();
    await fresh.query(drop);
  } catch (err) {
    console.error(`could not drop the scratch database ${dbName}: ${loggableErrorText(err)}; drop it by hand`);
  } finally {
    await fresh.end().catch(() => undefined);
  }
}

/**
 * `revert <name>`: the last migration applied, `down` and its row in typeorm_migrations in one transaction, under the
 * migration lock (revertMigration), so that the release that has it applies it again when it next starts. The name
 * is asked for, and must be the last one's: a count could revert one more than meant, with its data.
 */
async function revert(ds: DataSource, name: string): Promise<number> {
  let done: { last: string | undefined; reverted: boolean };
  try {
    done = await revertMigration(ds, name, cliWait(false));
  } catch (err) {
    if (!(err instanceof MigrationTableLockTimeout)) throw err;
    console.error(err.message);
    return 1;
  }
  if (!done.reverted) {
    console.error(done.last === undefined ? 'no migration is applied' : `${name} is not the last migration applied: ${done.last} is (revert that first)`);
    return 2;
  }
  console.log(`reverted ${name}`);
  return 0;
}

const args = process.argv.slice(2);
main(args).then(
  (code) => process.exit(stoppedBy ? signalExitCode(stoppedBy) : code),
  (err: unknown) => {
    if (stoppedBy) process.exit(signalExitCode(stoppedBy)); // the stop's own doing, not a failure to report
    console.error(`migrate failed: ${loggableErrorText(err)}${poolerHint(err)}`);
    // show's 1 means "migrations pending": a deploy script must not read an unreachable database as that.
    process.exit(args[0] === 'show' ? 3 : 1);
  },
);
