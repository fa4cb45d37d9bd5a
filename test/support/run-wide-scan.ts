/**
 * The run-wide leak scan, run once all files ran: the run log and every table
 * of the test databases (the run's and each worker's) searched for the fixed test secrets and for those
 * minted during the run (run-leak-scan.ts, minted-secrets.ts).
 *
 * summary-reporter.ts runs it before it prints the closing line, so that line
 * counts its findings; global-setup.ts's teardown runs it only when that
 * reporter did not (a --reporter on the command line replaces the configured
 * ones), and keeps the run log when it found something.
 *
 * It fails closed: a scan that cannot run (the database refuses connections, a
 * query fails) is a finding, and one source failing does not skip the other.
 */
import { LEAK_SCAN_RESULT_ENV, RUN_LOG_ENV } from './run-log-env.js';
import { MINTED_SECRETS_ENV, mintedSecretForms } from './minted-secrets.js';
import pg from 'pg';
import { readDatabaseUrl } from '../../src/db/database-url.js';
import { describeFinding, scanDatabase, scanRunLog, secretForms, type Needle } from './run-leak-scan.js';
import { RUN_DATABASE_URL_ENV, runDatabases, type NamedDatabase } from './worker-database.js';

export { LEAK_SCAN_RESULT_ENV };

const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/**
 * What the scans look for: the fixed test secrets (secrets.ts) and those minted so far in this run (the file
 * TEST_MINTED_SECRETS names). When that file cannot be read, the fixed ones and why (`unreadable`): a caller
 * that fails closed reports it.
 */
export function runSecretNeedles(): { needles: Needle[]; minted: number; unreadable?: unknown } {
  const fixed = secretForms();
  try {
    const path = process.env[MINTED_SECRETS_ENV];
    const m = path ? mintedSecretForms(path) : { secrets: 0, needles: [] };
    return { needles: [...fixed, ...m.needles], minted: m.secrets };
  } catch (e) {
    return { needles: fixed, minted: 0, unreadable: e };
  }
}

/** The run's databases (its own and each worker's, worker-database.ts); DATABASE_URL's in a run set up otherwise. */
async function databasesToScan(): Promise<NamedDatabase[]> {
  const serverUrl = process.env.TEST_SERVER_URL;
  if (!process.env[RUN_DATABASE_URL_ENV] || !serverUrl) {
    const url = process.env.DATABASE_URL;
    if (!url) throw new Error('DATABASE_URL is not set');
    return [{ name: readDatabaseUrl(url).pathname.slice(1), url }];
  }
  const admin = new pg.Client({ connectionString: serverUrl }); // the server's own database: the run's may refuse
  await admin.connect();
  try {
    return await runDatabases(admin);
  } finally {
    await admin.end();
  }
}

/**
 * Scans, prints its summary line (`run-wide leak scan: … N finding(s)`) and, on a finding, the findings and
 * process.exitCode = 1. Returns the findings, or undefined outside a run the global setup prepared.
 */
export async function runWideLeakScan(): Promise<string[] | undefined> {
  const runLog = process.env[RUN_LOG_ENV];
  if (!runLog) return undefined;
  const findings: string[] = [];
  const cannotRun = (what: string, e: unknown): void => {
    findings.push(`the scan could not run: ${what}: ${messageOf(e)}`);
  };

  const run = runSecretNeedles();
  const { needles, minted } = run;
  if (run.unreadable !== undefined) cannotRun('reading the minted secrets', run.unreadable);
  let logPart = 'the run log not scanned';
  try {
    const log = await scanRunLog(runLog, needles);
    logPart = `${log.lines} run-log lines`;
    findings.push(...log.findings.map((f) => describeFinding(f, 'line(s)')));
  } catch (e) {
    cannotRun('the run log', e);
  }
  let dbPart = 'the database not scanned';
  try {
    const databases = await databasesToScan();
    const several = databases.length > 1;
    let [rows, tables, scanned] = [0, 0, 0];
    for (const { name, url } of databases) {
      // With more than one (a worker's each), a finding and a database that cannot be scanned are named.
      const what = several ? `the database ${name}` : 'the database';
      try {
        const db = await scanDatabase(url, needles);
        [rows, tables, scanned] = [rows + db.rows, tables + db.tables, scanned + 1];
        findings.push(...db.findings.map((f) => (several ? `${what}: ` : '') + describeFinding(f, 'row(s)')));
      } catch (e) {
        cannotRun(what, e);
      }
    }
    if (scanned > 0) dbPart = `${rows} rows in ${tables} tables` + (several ? ` of ${scanned} of ${databases.length} databases` : '');
  } catch (e) {
    cannotRun('the databases', e);
  }

  process.env[LEAK_SCAN_RESULT_ENV] = findings.length ? 'findings' : 'clean';
  process.stdout.write(`run-wide leak scan: ${logPart}, ${dbPart}, ${needles.length} secret forms (${minted} minted secrets): ${findings.length} finding(s)\n`);
  if (findings.length) {
    // vitest only logs an error thrown from a reporter or a global teardown: the exit code is set here.
    process.exitCode = 1;
    process.stderr.write(`\nrun-wide leak scan: FAILED, ${findings.length} finding(s) (run log kept at ${runLog}):\n${findings.map((l) => `  - ${l}`).join('\n')}\n`);
  }
  return findings;
}
