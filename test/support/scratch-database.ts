/**
 * Databases a spec creates on the test server for itself (a fresh one for a
 * generated admin key, a migration replayed from an earlier schema) and drops
 * when it is done, and the databases of a PostgreSQL server a spec starts for
 * itself (startPgServer, a gateway's embedded one). The run-wide leak scan
 * (run-wide-scan.ts) reads only the run's own database, once all files ran: a
 * scratch database is gone by then. So it is scanned with the same needles
 * (the fixed test secrets and those minted so far) before it is dropped, and a
 * finding fails the spec.
 */
import pg from 'pg';
import { withDatabaseName } from '../../src/db/database-url.js';
import { describeFinding, scanDatabase } from './run-leak-scan.js';
import { runSecretNeedles } from './run-wide-scan.js';

const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/** The URL of database `dbName` on the test server (TEST_SERVER_URL, or the run database's server). */
export function scratchDatabaseUrl(dbName: string): string {
  return withDatabaseName(process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL!, dbName);
}

/**
 * The leak scan's findings in the database at `url` (names and where, never a value). Fails closed: a scan
 * that cannot run, or minted secrets that cannot be read, is a finding.
 */
export async function scanScratchDatabase(url: string): Promise<string[]> {
  const { needles, unreadable } = runSecretNeedles();
  const findings = unreadable === undefined ? [] : [`the scan could not run: reading the minted secrets: ${messageOf(unreadable)}`];
  try {
    findings.push(...(await scanDatabase(url, needles)).findings.map((f) => describeFinding(f, 'row(s)')));
  } catch (e) {
    findings.push(`the scan could not run: ${messageOf(e)}`);
  }
  return findings;
}

/** The error a leak scan's findings fail a spec with: what was scanned, then one finding a line. */
function leakError(what: string, findings: string[]): Error {
  return new Error(`leak scan of ${what}: ${findings.length} finding(s):\n${findings.map((f) => `  - ${f}`).join('\n')}`);
}

/**
 * Throws the leak scan's findings in the database at `url` (scanScratchDatabase; `what` names it in the error): for
 * a database the run-wide scan never reads, scanned while it still exists.
 */
export async function expectNoLeaksIn(url: string, what: string): Promise<void> {
  const findings = await scanScratchDatabase(url);
  if (findings.length > 0) throw leakError(what, findings);
}

/**
 * Scans database `dbName` (on the test server, scratchDatabaseUrl; `admin` is a client of that server), then
 * drops it through `admin` whatever the scan found, and throws the findings: the spec (its afterAll or finally)
 * fails, and no scratch database is left behind holding a secret. A database that was never created (the
 * spec's setup failed first) has nothing to scan.
 */
export async function dropScratchDatabase(admin: pg.Client, dbName: string): Promise<void> {
  let findings: string[] = [];
  try {
    const exists = (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbName])).rowCount! > 0;
    if (exists) findings = await scanScratchDatabase(scratchDatabaseUrl(dbName));
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  }
  if (findings.length > 0) throw leakError(`scratch database ${dbName} before its drop`, findings);
}

/** A fresh database on the test server for one spec: its URL, and `drop` (leak-scanned first: dropScratchDatabase). */
export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * Creates database `<prefix>_<pid>_<now>` on the test server (TEST_SERVER_URL, or the run database's server); a copy
 * of database `template` (no session may be connected to it) when given.
 */
export async function createScratchDatabase(prefix: string, opts: { template?: string } = {}): Promise<ScratchDatabase> {
  const dbName = `${prefix}_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${dbName}${opts.template ? ` TEMPLATE ${opts.template}` : ''}`);
  } catch (err) {
    await admin.end();
    throw err;
  }
  return {
    url: scratchDatabaseUrl(dbName),
    drop: async () => {
      try {
        await dropScratchDatabase(admin, dbName);
      } finally {
        await admin.end();
      }
    },
  };
}

/** Runs `statements` in order on a connection of their own to `url` (as an admin would in psql), then closes it. */
export async function runStatements(url: string, statements: readonly string[]): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    for (const s of statements) await c.query(s);
  } finally {
    await c.end();
  }
}
