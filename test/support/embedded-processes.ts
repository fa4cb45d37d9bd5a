import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The processes whose parent is `pid`. */
export function childrenOf(pid: number): number[] {
  return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
    .split('\n')
    .map((s) => Number(s.trim()))
    .filter((n) => n > 0);
}

/** The embedded cluster's running postmaster, as its postmaster.pid under `pgDir` names it: its pid and port. */
export function postmasterOf(pgDir: string): { pid: number; port: number } {
  const lines = readFileSync(join(pgDir, 'postmaster.pid'), 'utf8').split('\n');
  return { pid: Number(lines[0]), port: Number(lines[3]) };
}
