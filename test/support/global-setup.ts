import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.js';
import { RUN_LOG_ENV } from './run-log-env.js';
import { describeFinding, scanDatabase, scanRunLog, secretForms } from './run-leak-scan.js';

/**
 * One PostgreSQL for the whole run: DATABASE_URL's server when set, else an
 * embedded one in a child process (never imported here: STACK.md gotcha 1).
 * Either way the tests get a fresh database of their own, dropped at the end.
 *
 * One run log too (run-log.ts): every log line of every in-process gateway and
 * every child's output. The teardown, after all files, scans it and every table
 * of the test database for the test secrets (run-leak-scan.ts) and fails the
 * run if one is found.
 */
export default async function setup(): Promise<() => Promise<void>> {
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
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${dbName}`;
  process.env.TEST_SERVER_URL = serverUrl;
  process.env.DATABASE_URL = url.toString(); // forked workers inherit it

  const runDir = mkdtempSync(join(tmpdir(), 'tg-test-run-'));
  const runLog = join(runDir, 'run.log');
  writeFileSync(runLog, '');
  process.env[RUN_LOG_ENV] = runLog; // forked workers inherit it too

  return async () => {
    let leaks: string[];
    try {
      leaks = await leakScan(process.env.DATABASE_URL!, runLog);
    } finally {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
      await c.end();
      await stopEmbedded?.();
    }
    if (leaks.length) {
      // vitest only logs an error thrown from a global teardown ("error during close"): set the exit code ourselves.
      process.exitCode = 1;
      process.stderr.write(`\nrun-wide leak scan: FAILED, ${leaks.length} finding(s) (run log kept at ${runLog}):\n${leaks.map((l) => `  - ${l}`).join('\n')}\n`);
      throw new Error(`run-wide leak scan: test secrets found outside the encrypted columns:\n${leaks.join('\n')}`);
    }
    if (process.env.TEST_KEEP_RUN_LOG === '1') process.stdout.write(`run log kept at ${runLog} (TEST_KEEP_RUN_LOG=1)\n`);
    else rmSync(runDir, { recursive: true, force: true });
  };
}

/** The findings of the run-wide scan, each naming the secret's variable (never its value) and where it was found. */
async function leakScan(databaseUrl: string, runLog: string): Promise<string[]> {
  const needles = secretForms();
  const log = await scanRunLog(runLog, needles);
  const db = await scanDatabase(databaseUrl, needles);
  process.stdout.write(
    `run-wide leak scan: ${log.lines} run-log lines, ${db.rows} rows in ${db.tables} tables, ${needles.length} secret forms: ${log.findings.length + db.findings.length} finding(s)\n`,
  );
  return [...log.findings.map((f) => describeFinding(f, 'line(s)')), ...db.findings.map((f) => describeFinding(f, 'row(s)'))];
}
