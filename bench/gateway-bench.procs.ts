/**
 * The processes the gateway benchmark runs (PostgreSQL, the vendor emulator,
 * the gateway as built for production), their clean-up, and what we read
 * about them from /proc (CPU time, RSS).
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/embedded-postgres.js';

const log = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** Clean-up steps, run last-in first-out once (normal end, failure or a signal). */
export class Cleanup {
  private steps: { name: string; fn: () => Promise<void> }[] = [];
  private running: Promise<void> | undefined;

  add(name: string, fn: () => Promise<void>): void {
    this.steps.push({ name, fn });
  }

  run(): Promise<void> {
    this.running ??= (async () => {
      for (const step of this.steps.reverse()) {
        try {
          await step.fn();
        } catch (err) {
          process.stderr.write(`clean-up "${step.name}" failed: ${err instanceof Error ? err.message : String(err)}\n`);
        }
      }
      this.steps = [];
    })();
    return this.running;
  }
}

/** Children still running when this process exits get SIGKILL (the last resort; Cleanup is the normal path). */
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

function alive(c: ChildProcess): boolean {
  return c.exitCode === null && c.signalCode === null;
}

async function stopChild(c: ChildProcess, graceMs = 10_000): Promise<void> {
  if (!alive(c)) return;
  const exited = once(c, 'exit');
  c.kill('SIGTERM');
  const timer = setTimeout(() => {
    if (alive(c)) c.kill('SIGKILL');
  }, graceMs);
  await exited;
  clearTimeout(timer);
}

export interface BenchDatabase {
  /** URL of the fresh database the gateway uses */
  url: string;
  kind: 'embedded (durable: fsync on)' | 'DATABASE_URL server';
  /**
   * PostgreSQL processes whose CPU we can count: the whole embedded server, or
   * on a DATABASE_URL server the backends serving our database (when that
   * server runs on this machine; none otherwise).
   */
  serverPids(): Promise<number[]>;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * DATABASE_URL set: a fresh database on that server, dropped at the end.
 * Unset: an embedded PostgreSQL with durable settings in .tmp/bench-pg (deleted at the end),
 * and a fresh database on it.
 */
export async function startDatabase(root: string, cleanup: Cleanup): Promise<BenchDatabase> {
  let serverUrl = process.env.DATABASE_URL;
  const kind: BenchDatabase['kind'] = serverUrl ? 'DATABASE_URL server' : 'embedded (durable: fsync on)';
  let embeddedPid: number | undefined;
  if (!serverUrl) {
    const dir = join(root, '.tmp', 'bench-pg');
    const pidFile = join(dir, 'postmaster.pid');
    if (existsSync(pidFile)) {
      const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
      if (Number.isInteger(pid) && pid > 0 && pidAlive(pid)) throw new Error(`${dir} is in use by a running PostgreSQL (pid ${pid}): is another benchmark running?`);
    }
    rmSync(dir, { recursive: true, force: true }); // left over by a killed run
    const embedded = await startEmbeddedPostgres(dir, { persistent: false, fast: false });
    cleanup.add('embedded PostgreSQL', () => embedded.stop());
    serverUrl = embedded.url;
    embeddedPid = embedded.child.pid;
  }
  const dbName = `tg_gwbench_${process.pid}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${dbName}`);
  } finally {
    await admin.end();
  }
  if (kind === 'DATABASE_URL server') {
    cleanup.add(`drop database ${dbName}`, async () => {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    });
  }
  const url = new URL(serverUrl);
  url.pathname = `/${dbName}`;
  const serverPids = async (): Promise<number[]> => {
    if (embeddedPid !== undefined) return descendants(embeddedPid);
    const c = new pg.Client({ connectionString: serverUrl });
    await c.connect();
    try {
      const res = await c.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [dbName]);
      return res.rows.map((r) => r.pid).filter((pid) => existsSync(`/proc/${pid}/stat`));
    } finally {
      await c.end();
    }
  };
  return { url: url.toString(), kind, serverPids };
}

export interface ChildService {
  url: string;
  pid: number;
  /** the last lines the child wrote (stdout and stderr) */
  tail(): string;
  /** lines at level warn or above the child logged */
  problemLines(): string[];
  alive(): boolean;
  /** how it ended, once it has: "code 1" / "signal SIGTERM" */
  exitInfo(): string | undefined;
}

/**
 * Spawns `node <script>` and resolves with the URL from its "listening on http://…" line.
 * Output goes to `logFile`; the last lines are kept for error reports.
 */
async function startService(
  name: string,
  root: string,
  script: string,
  env: NodeJS.ProcessEnv,
  logFile: string,
  cleanup: Cleanup,
  nodeArgs: string[] = [],
  timeoutMs = 60_000,
): Promise<ChildService> {
  const path = join(root, script);
  if (!existsSync(path)) throw new Error(`${path} is missing: run "npm run build" first`);
  const child = spawn(process.execPath, [...nodeArgs, path], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  cleanup.add(name, () => stopChild(child));
  const out = createWriteStream(logFile);
  cleanup.add(`${name} log`, () => new Promise<void>((resolve) => out.end(resolve)));
  const tail: string[] = [];
  const problems: string[] = [];
  let ended: string | undefined;
  child.once('exit', (code, signal) => {
    ended = signal ? `signal ${signal}` : `code ${String(code)}`;
  });
  const listening = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within ${timeoutMs} ms:\n${tail.join('\n')}`)), timeoutMs);
    const onLine = (line: string): void => {
      out.write(`${line}\n`);
      tail.push(line);
      if (tail.length > 60) tail.shift();
      if (/"level":\s*(4|5|6)0\b|"level":"(warn|error|fatal)"|^fatal:|^warning:/.test(line)) problems.push(line);
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    createInterface({ input: child.stdout! }).on('line', onLine);
    createInterface({ input: child.stderr! }).on('line', onLine);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (code ${String(code)}, signal ${String(signal)}):\n${tail.join('\n')}`));
    });
  });
  const url = await listening;
  log(`  ${name} pid ${String(child.pid)} at ${url}`);
  return { url, pid: child.pid!, tail: () => tail.join('\n'), problemLines: () => problems, alive: () => alive(child), exitInfo: () => ended };
}

/** The vendor emulator as its own process (`node dist/src/emulator/main.js`, EMULATOR_PORT=0). */
export function startEmulator(root: string, logFile: string, cleanup: Cleanup): Promise<ChildService> {
  return startService(
    'vendor emulator',
    root,
    'dist/src/emulator/main.js',
    { PATH: process.env.PATH, HOME: process.env.HOME, EMULATOR_PORT: '0', NODE_ENV: 'production' },
    logFile,
    cleanup,
  );
}

/** The calibration server (bench/reference-server.ts): two durable commits per request on the bench database. */
export function startReference(root: string, dbUrl: string, poolSize: number, logFile: string, cleanup: Cleanup): Promise<ChildService> {
  return startService(
    'reference server',
    root,
    'dist/bench/reference-server.js',
    { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: dbUrl, DB_POOL_SIZE: String(poolSize), NODE_ENV: 'production' },
    logFile,
    cleanup,
  );
}

/**
 * The gateway as production runs it: `node dist/src/main.js`; with `workers` > 1,
 * that many of it sharing one port under bench/cluster-launcher.ts.
 */
export function startGateway(root: string, env: NodeJS.ProcessEnv, logFile: string, cleanup: Cleanup, nodeArgs: string[] = [], workers = 1): Promise<ChildService> {
  const script = workers > 1 ? 'dist/bench/cluster-launcher.js' : 'dist/src/main.js';
  return startService('gateway', root, script, workers > 1 ? { ...env, BENCH_GATEWAY_WORKERS: String(workers) } : env, logFile, cleanup, nodeArgs);
}

// ---- /proc readings --------------------------------------------------------

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
