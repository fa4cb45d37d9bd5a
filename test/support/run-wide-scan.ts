/**
 * The run-wide leak scan, run once all files ran: the run log and every table
 * of the test database searched for the fixed test secrets and for those
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
import { describeFinding, scanDatabase, scanRunLog, secretForms, type Needle } from './run-leak-scan.js';

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
    if (!process.env.DATABASE_URL) throw new Error('DATABASE_URL is not set');
    const db = await scanDatabase(process.env.DATABASE_URL, needles);
    dbPart = `${db.rows} rows in ${db.tables} tables`;
    findings.push(...db.findings.map((f) => describeFinding(f, 'row(s)')));
  } catch (e) {
    cannotRun('the database', e);
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
