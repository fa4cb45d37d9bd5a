import { mkdtempSync, mkdirSync, existsSync, utimesSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { removeStaleRunDirs, STALE_AFTER_MS, staleRunDatabases } from './stale-runs.js';

describe('what interrupted test runs left behind', () => {
  const now = Date.UTC(2026, 11, 6, 12);
  const old = now - STALE_AFTER_MS - 1;
  const recent = now - 60_000;

  it('a run database is stale once its run started over a day ago and its process is gone; nothing else is touched', () => {
    const names = [`tg_test_111_${old}`, `tg_test_222_${old}`, `tg_test_333_${recent}`, 'tg_test_444_123', 'postgres', 'tg_mig_lock_release_1', `tg_test_x_${old}`];
    expect(staleRunDatabases(names, now, (pid) => pid === 222)).toEqual([`tg_test_111_${old}`]);
  });

  it("a worker's database goes with its run's; a name merely starting like one is kept", () => {
    const names = [`tg_test_111_${old}_w2`, `tg_test_222_${old}_w2`, `tg_test_111_${old}_w`, `tg_test_111_${old}_x2`, `tg_test_111_${old}_w2_w3`];
    expect(staleRunDatabases(names, now, (pid) => pid === 222)).toEqual([`tg_test_111_${old}_w2`]);
  });

  it('a run directory untouched for over a day is removed; a recent one and other files are kept', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tg-stale-runs-spec-'));
    try {
      for (const name of ['tg-test-run-old', 'tg-test-run-new', 'other-old']) {
        mkdirSync(join(dir, name));
        writeFileSync(join(dir, name, 'run.log'), '');
      }
      for (const name of ['tg-test-run-old', 'other-old']) utimesSync(join(dir, name), new Date(old), new Date(old));
      expect(removeStaleRunDirs(dir, now)).toEqual(['tg-test-run-old']);
      expect(['tg-test-run-old', 'tg-test-run-new', 'other-old'].map((n) => existsSync(join(dir, n)))).toEqual([false, true, true]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
