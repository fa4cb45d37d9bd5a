/**
 * The processes the gateway benchmark runs (the vendor emulator, the gateway as
 * built for production, the reference server) and their clean-up. PostgreSQL is
 * in gateway-bench.database.ts, what we read about processes from /proc (CPU
 * time, RSS) in gateway-bench.sampling.ts; both are re-exported from here.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export { startDatabase, type BenchDatabase } from './gateway-bench.database.js';
export { cpuDelta, cpuMs, cpuMsOf, descendants, machineBusyMs, rssKb, ticksPerSecond, treeCpuMs, treeRssKb } from './gateway-bench.sampling.js';

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
