/**
 * What we read about the benchmark's processes and the machine from /proc:
 * CPU time (per process, per process tree, machine-wide busy time) and RSS.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let clkTck: number | undefined;
/** Clock ticks per second (`getconf CLK_TCK`, 100 on Linux almost always). */
export function ticksPerSecond(): number {
  if (clkTck === undefined) {
    try {
      clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clkTck = 100;
    }
  }
  return clkTck;
}

/** Fields 3.. of /proc/<pid>/stat (index 0 = state, 1 = ppid, 11 = utime, 12 = stime). */
function statFields(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** utime + stime of a process, in ms. */
export function cpuMs(pid: number): number {
  const fields = statFields(pid);
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond();
}

/** CPU ms of each of several processes; ones that have gone are left out. */
export function cpuMsOf(pids: number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      out.set(pid, cpuMs(pid));
    } catch {
      // exited
    }
  }
  return out;
}

/**
 * CPU spent between two readings by the processes alive at the second one
 * (a process born in between counts from 0; one that exited in between is lost).
 */
export function cpuDelta(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0;
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0);
  return total;
}

/** Every live descendant of `root` (not `root` itself). */
export function descendants(root: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      parent.set(Number(name), Number(statFields(Number(name))[1]));
    } catch {
      // exited while we looked
    }
  }
  const out: number[] = [];
  const frontier = [root];
  while (frontier.length) {
    const p = frontier.pop()!;
    for (const [pid, ppid] of parent) {
      if (ppid === p) {
        out.push(pid);
        frontier.push(pid);
      }
    }
  }
  return out;
}

/** Busy CPU time of the whole machine (all cores), in ms: everything but idle and iowait. */
export function machineBusyMs(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const v = line.trim().split(/\s+/).slice(1, 9).map(Number); // user nice system idle iowait irq softirq steal
  const busy = v.reduce((a, b) => a + b, 0) - v[3] - v[4];
  return (busy * 1000) / ticksPerSecond();
}

/** Resident set size of a process, in kB (VmRSS). */
export function rssKb(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]);
}

/**
 * A reading summed over a process and its live descendants (the gateway's cluster
 * workers under --workers); throws when `root` itself is gone.
 */
function treeSum(root: number, read: (pid: number) => number): number {
  let total = read(root);
  for (const pid of descendants(root)) {
    try {
      total += read(pid);
    } catch {
      // exited while we looked
    }
  }
  return total;
}

export const treeCpuMs = (root: number): number => treeSum(root, cpuMs);
export const treeRssKb = (root: number): number => treeSum(root, rssKb);
