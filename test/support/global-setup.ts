import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { withDatabaseName } from '../../src/db/database-url.js';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.js';
import { MINTED_SECRETS_ENV } from './minted-secrets.js';
import { LEAK_SCAN_RESULT_ENV, RUN_LOG_ENV } from './run-log-env.js';
import { runWideLeakScan } from './run-wide-scan.js';
import { removeStaleRunDirs, staleRunDatabases } from './stale-runs.js';
import { connectionShortfall, testWorkers } from './test-workers.js';
import { RUN_DATABASE_URL_ENV, runDatabases } from './worker-database.js';

/**
 * One PostgreSQL for the whole run: DATABASE_URL's server when set, else an
 * embedded one in a child process (never imported here: STACK.md gotcha 1).
 * Either way the tests get fresh databases of their own, dropped at the end:
 * the run's, which the first worker uses, and one for each other worker
 * (worker-database.ts).
 *
 * One run log too (run-log.ts): every log line of every in-process gateway and
 * every child's output, and the list of secrets minted during the run
 * (minted-secrets.ts). After all files, the run-wide leak scan searches the
 * run log and every table of the test database for the test secrets and fails
 * the run if one is found (run-wide-scan.ts: summary-reporter.ts runs it while
 * the database still exists; this teardown only when that reporter did not).
 */
export default async function setup(): Promise<() => Promise<void>> {
  removeStaleRunDirs(tmpdir(), Date.now()); // interrupted runs' (stale-runs.ts)
  const runDir = mkdtempSync(join(tmpdir(), 'tg-test-run-'));
  const runLog = join(runDir, 'run.log');
  writeFileSync(runLog, '');
  process.env[RUN_LOG_ENV] = runLog; // forked workers inherit it
  process.env[MINTED_SECRETS_ENV] = join(runDir, 'minted-secrets.tsv'); // and so do the emulators they start, and
  // every embedded PostgreSQL (this run's, below, and any a gateway child starts) records its password in it
  delete process.env[LEAK_SCAN_RESULT_ENV];

  let serverUrl = process.env.DATABASE_URL;
  let stopEmbedded: (() => Promise<void>) | undefined;
  if (!serverUrl) {
    // startEmbeddedPostgres spawns scripts/pg-server.mjs; embedded-postgres itself is never imported here.
    const embedded = await startEmbeddedPostgres(`.tmp/pg-test-${process.pid}`, { persistent: false, fast: true });
    serverUrl = embedded.url;
    process.env.TEST_EMBEDDED_PG = '1';
    stopEmbedded = () => embedded.stop();
  }
  const dbName = `tg_test_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  const existing = (await admin.query(`SELECT datname FROM pg_database WHERE datname LIKE 'tg\\_test\\_%'`)).rows as { datname: string }[];
  for (const stale of staleRunDatabases(existing.map((r) => r.datname), Date.now())) {
    await admin.query(`DROP DATABASE IF EXISTS ${stale} WITH (FORCE)`).catch(() => undefined);
  }
  await admin.query(`CREATE DATABASE ${dbName}`);
  const [{ max_connections: maxConnections }] = (await admin.query('SHOW max_connections')).rows as [{ max_connections: string }];
  await admin.end();
  const shortfall = connectionShortfall(Number(maxConnections), testWorkers());
  if (shortfall) process.stderr.write(`warning: ${shortfall}\n`);
  const url = withDatabaseName(serverUrl, dbName);
  process.env.TEST_SERVER_URL = serverUrl;
  process.env.DATABASE_URL = url; // forked workers inherit it too (worker-database-setup.ts: the first's)
  process.env[RUN_DATABASE_URL_ENV] = url;

  return async () => {
    try {
      // The summary reporter scanned before its closing line, unless a --reporter on the command line replaced it.
      if (process.env[LEAK_SCAN_RESULT_ENV] === undefined) await runWideLeakScan();
    } finally {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      const databases = await runDatabases(c).catch(() => [{ name: dbName }]);
      for (const { name } of databases) await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await c.end();
      await stopEmbedded?.();
    }
    if (process.env[LEAK_SCAN_RESULT_ENV] !== 'clean') {
      process.exitCode = 1; // set by the scan already; a run whose scan found something never exits 0
      return; // the run log is kept: the scan's findings say where
    }
    if (process.env.TEST_KEEP_RUN_LOG === '1') process.stdout.write(`run log kept at ${runLog} (TEST_KEEP_RUN_LOG=1)\n`);
    else rmSync(runDir, { recursive: true, force: true });
  };
}
