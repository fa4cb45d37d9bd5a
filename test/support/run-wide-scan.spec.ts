import { execFile } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The run-wide leak scan as CI sees it: a vitest of its own (the suite's global setup, teardown and reporters,
 * on fixtures/leak-run.fixture.ts) whose fixture leaks a secret or breaks the scan. CI reads the exit code and
 * the last line, `N passed, N failed`: a finding, or a scan that could not run, must show in both.
 */
interface Run {
  code: number;
  lines: string[];
  stderr: string;
}

function vitestRun(fixture: string, args: string[] = []): Promise<Run> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(?:VITEST|TEST_)/.test(k)) env[k] = v; // this run's, not the child's
  env.DATABASE_URL = process.env.TEST_SERVER_URL; // the child's global setup makes its own database there
  env.LEAK_FIXTURE = fixture;
  env.NO_COLOR = '1';
  return new Promise((resolve) => {
    execFile(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', '--config', 'test/support/fixtures/leak-run.config.ts', ...args], { env }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      resolve({ code, lines: stdout.split('\n').filter((l) => l.trim() !== ''), stderr });
    });
  });
}

/** The kept run log's directory, removed (it holds the leaked secret). */
function keptRunLog(run: Run): string {
  const path = /run log kept at (\S+)\)/.exec(run.stderr)?.[1];
  expect(path, run.stderr).toBeTruthy();
  expect(existsSync(path!)).toBe(true);
  rmSync(dirname(path!), { recursive: true, force: true });
  return path!;
}

describe('the run-wide leak scan fails the run, in its exit code and in the closing line', () => {
  it('a fixed and a minted secret in the run log: two failures, scanned before the closing line', async () => {
    const run = await vitestRun('static,minted');
    expect(run.code, run.stderr).toBe(1);
    expect(run.lines.at(-1)).toBe('1 passed, 2 failed');
    expect(run.lines.at(-2)).toMatch(/^run-wide leak scan: 2 run-log lines, 0 rows in 0 tables, \d+ secret forms \(1 minted secrets\): 2 finding\(s\)$/);
    expect(run.stderr).toContain('SHOPIFY_TOKEN (plain) in the run log');
    expect(run.stderr).toContain('fixture token #1 (url-encoded) in the run log');
    keptRunLog(run);
  }, 60_000);

  it('a database that refuses connections: the scan that could not run is a finding, and the run log is still scanned', async () => {
    const run = await vitestRun('static,break');
    expect(run.code, run.stderr).toBe(1);
    expect(run.lines.at(-1)).toBe('1 passed, 2 failed');
    expect(run.lines.at(-2)).toMatch(/^run-wide leak scan: 1 run-log lines, the database not scanned, .*: 2 finding\(s\)$/);
    expect(run.stderr).toMatch(/the scan could not run: the database: database "tg_test_\w+" is not currently accepting connections/);
    expect(run.stderr).toContain('SHOPIFY_TOKEN (plain) in the run log');
    keptRunLog(run);
  }, 60_000);

  it('with the summary reporter replaced (--reporter on the command line) the global teardown scans', async () => {
    const run = await vitestRun('static', ['--reporter=dot']);
    expect(run.code, run.stderr).toBe(1);
    expect(run.lines.join('\n')).toContain('run-wide leak scan: 1 run-log lines, 0 rows in 0 tables');
    expect(run.stderr).toContain('SHOPIFY_TOKEN (plain) in the run log');
    keptRunLog(run);
  }, 60_000);

  it('a clean run: 0 findings, exit 0, the closing line last', async () => {
    const run = await vitestRun('');
    expect(run.code, run.stderr).toBe(0);
    expect(run.lines.slice(-2)).toEqual([expect.stringMatching(/^run-wide leak scan: 0 run-log lines, .*: 0 finding\(s\)$/), '1 passed, 0 failed']);
  }, 60_000);
});
