/**
 * A database for each vitest worker. The run's database (`tg_test_<pid>_<ms>`, global-setup.ts) is the first
 * worker's; worker N > 1 gets `tg_test_<pid>_<ms>_w<N>` on the same server, created the first time that worker runs
 * a file (vitest's VITEST_POOL_ID, 1..maxWorkers). Files in different workers run at the same time and never see one
 * another's rows, locks or migrations; files in one worker run one after another on its database, as they did on the
 * one shared database before. Every spec, and every process it starts, reads process.env.DATABASE_URL, which is set
 * here before the file is imported.
 *
 * The run-wide leak scan reads all of them (runDatabases) and the global teardown drops them.
 */
import pg from 'pg';
import { readDatabaseUrl, withDatabaseName } from '../../src/db/database-url.js';

/** Set by global-setup.ts: the run database's URL (the first worker's), which the others are named after. */
export const RUN_DATABASE_URL_ENV = 'TEST_RUN_DATABASE_URL';

/** The database name of worker `poolId` (1-based) of the run whose database is `runDb`. */
export function workerDatabaseName(runDb: string, poolId: number): string {
  return poolId <= 1 ? runDb : `${runDb}_w${String(poolId)}`;
}

/** A database's name and URL. */
export interface NamedDatabase {
  name: string;
  url: string;
}

/** The run's database (name, URL) when global-setup.ts prepared this run, else undefined (a spec run some other way). */
function runDatabase(): NamedDatabase | undefined {
  const url = process.env[RUN_DATABASE_URL_ENV];
  return url ? { name: readDatabaseUrl(url).pathname.slice(1), url } : undefined;
}

/**
 * Points process.env.DATABASE_URL at this worker's database, creating it on first use (a worker process started
 * again under the same pool id finds it there: its files' rows stay, as on the shared database).
 */
export async function useWorkerDatabase(): Promise<void> {
  const run = runDatabase();
  const poolId = Number(process.env.VITEST_POOL_ID ?? '1');
  if (!run || !Number.isInteger(poolId) || poolId <= 1) return;
  const name = workerDatabaseName(run.name, poolId);
  const url = withDatabaseName(run.url, name);
  if (process.env.DATABASE_URL === url) return; // this worker's earlier file set it
  const admin = new pg.Client({ connectionString: run.url });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } catch (e) {
    if ((e as { code?: string }).code !== '42P04') throw e; // 42P04: it exists already
  } finally {
    await admin.end();
  }
  process.env.DATABASE_URL = url;
}

/** The run's databases (the run's and every worker's), read from the server `admin` is connected to. */
export async function runDatabases(admin: pg.Client): Promise<NamedDatabase[]> {
  const run = runDatabase();
  if (!run) return [];
  const { rows } = await admin.query<{ datname: string }>(
    `SELECT datname FROM pg_database WHERE datname = $1 OR datname ~ ('^' || $1 || '_w[0-9]+$') ORDER BY datname`,
    [run.name],
  );
  return rows.map((r) => ({ name: r.datname, url: withDatabaseName(run.url, r.datname) }));
}
