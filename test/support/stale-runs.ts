/**
 * What an interrupted test run (Ctrl-C, a killed CI job) leaves behind: its databases `tg_test_<pid>_<ms>` and
 * `tg_test_<pid>_<ms>_w<N>` on the test server, and its run directory `tg-test-run-*` (the run log, the minted secrets) in the temp dir. The next run's
 * global setup removes those of runs that started over a day ago and whose process is gone: no run lasts that long,
 * so nothing of a run still going (here, or on another machine sharing the server) is touched.
 */
import { readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const STALE_AFTER_MS = 24 * 60 * 60 * 1000;

const RUN_DB = /^tg_test_(\d+)_(\d{13})(?:_w\d+)?$/; // a worker's database ends _w<N> (worker-database.ts)

/** Whether a process with this id runs on this machine (EPERM: it does, as another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Of the database names given, the test runs' that started more than STALE_AFTER_MS before `now` and whose process is gone. */
export function staleRunDatabases(names: string[], now: number, alive: (pid: number) => boolean = processAlive): string[] {
  return names.filter((name) => {
    const m = RUN_DB.exec(name);
    return m !== null && now - Number(m[2]) > STALE_AFTER_MS && !alive(Number(m[1]));
  });
}

/** Removes the run directories in `dir` untouched for more than STALE_AFTER_MS; their names. */
export function removeStaleRunDirs(dir: string, now: number): string[] {
  const removed: string[] = [];
  for (const name of readdirSync(dir)) {
    if (!name.startsWith('tg-test-run-')) continue;
    const path = join(dir, name);
    try {
      if (now - statSync(path).mtimeMs <= STALE_AFTER_MS) continue;
      rmSync(path, { recursive: true, force: true });
      removed.push(name);
    } catch {
      // Gone meanwhile, or not ours to remove: left as it is.
    }
  }
  return removed;
}
