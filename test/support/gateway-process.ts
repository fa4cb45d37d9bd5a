/**
 * The gateway as production runs it: `node dist/src/main.js` in a child
 * process (so a test can kill -9 it, run several replicas on one database, or
 * take its database away), plus the embedded PostgreSQL server script in a
 * child process whose server can be stopped and started again over stdin.
 * Everything a child writes is kept so the leak scans can read it, and goes
 * to the run log (run-log.ts) for the run-wide scan; so do the gateway's
 * responses to the tests and its /metrics when stopped (response-log.ts). The
 * embedded server's database is leak-scanned before it is deleted
 * (scratch-database.ts): the run-wide scan reads only DATABASE_URL's.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { logMetrics, recordingResponses } from './response-log.js';
import { teeChildToRunLog } from './run-log.js';
import { expectNoLeaksIn } from './scratch-database.js';
import { setupOrg, type OrgSetup } from './scenario.js';
import { TEST_ADMIN_KEY, TEST_MASTER_KEY } from './secrets.js';
import type { TestApp } from './test-app.js';
import { trackChild } from './child-processes.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = fileURLToPath(new URL('../../dist/src/main.js', import.meta.url));
const PG_SERVER = fileURLToPath(new URL('../../scripts/pg-server.mjs', import.meta.url));
const LISTENING = /listening on (http:\/\/[^\s]+)/;

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface GatewayProcess {
  url: string;
  pid: number;
  /** supertest against the child's URL; every response goes to the run log */
  http: TestAgent;
  /** everything the child wrote so far (stdout then stderr) */
  output(): string;
  kill(signal?: NodeJS.Signals): void;
  /** Signals the gateway's whole process group, as Ctrl-C in a terminal does (started with `{ group: true }` only). */
  killGroup(signal: NodeJS.Signals): void;
  waitExit(): Promise<ExitInfo>;
  /**
   * /metrics to the run log now (skipped after `timeoutMs` if it does not answer). stop() does it, but a gateway a
   * test ends with a signal is dead by then: call this first, at a point where one more GET changes nothing the
   * test asserts.
   */
  logMetrics(timeoutMs?: number): Promise<void>;
  /** /metrics to the run log (if it still answers), then SIGTERM, then SIGKILL if it has not exited after `graceMs` */
  stop(graceMs?: number): Promise<void>;
}

/** Every child this worker started is tracked (child-processes.ts), so a failing or timed-out test leaves none behind. */
function track(child: ChildProcess): Promise<ExitInfo> {
  trackChild(child);
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

/** The environment of a production gateway on the test database, with `overrides` on top. */
export function gatewayEnv(overrides: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_ENV: 'production',
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: process.env.DATABASE_URL,
    MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY,
    BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY,
    LOG_LEVEL: 'info',
    RATE_LIMIT_RPS: '0',
    DATA_DIR: '.tmp/data-gateway-process',
  };
  for (const [k, v] of Object.entries(overrides)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

/**
 * Starts `node dist/src/main.js` (build first: `npm test` does) and resolves
 * once it prints its "listening on http://…" line.
 */
export async function startGatewayProcess(
  overrides: Record<string, string | undefined> = {},
  startTimeoutMs = 30_000,
  opts: { group?: boolean } = {},
): Promise<GatewayProcess> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run "npm run build" first`);
  // group: the gateway leads its own process group, like a command started from a shell.
  const child = spawn(process.execPath, [MAIN], { cwd: ROOT, env: gatewayEnv(overrides), stdio: ['ignore', 'pipe', 'pipe'], detached: opts.group === true });
  const exited = track(child);
  teeChildToRunLog(child, 'gateway (dist/src/main.js)');
  const out: string[] = [];
  const err: string[] = [];
  child.stdout!.setEncoding('utf8').on('data', (c: string) => out.push(c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => err.push(c));
  const output = (): string => out.join('') + err.join('');

  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`gateway did not start within ${startTimeoutMs} ms:\n${output().slice(-4000)}`));
    }, startTimeoutMs);
    const onData = (): void => {
      const m = LISTENING.exec(out.join(''));
      if (!m) return;
      clearTimeout(timer);
      child.stdout!.off('data', onData);
      resolve(m[1]);
    };
    child.stdout!.on('data', onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited during start-up (code ${String(code)}, signal ${String(signal)}):\n${output().slice(-4000)}`));
    });
  });

  const kill = (signal: NodeJS.Signals = 'SIGTERM'): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  const killGroup = (signal: NodeJS.Signals): void => {
    if (!opts.group) throw new Error('killGroup needs startGatewayProcess(…, { group: true })');
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, signal);
  };
  return {
    url,
    pid: child.pid!,
    http: recordingResponses(request(url)),
    output,
    kill,
    killGroup,
    waitExit: () => exited,
    logMetrics: (timeoutMs = 2_000) => logMetrics(url, timeoutMs),
    async stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      await logMetrics(url, 2_000);
      if (child.exitCode !== null || child.signalCode !== null) return;
      kill('SIGTERM');
      const timer = setTimeout(() => kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** setupOrg (scenario.ts) through a child gateway: it only needs the HTTP client. */
export function setupOrgVia(gw: GatewayProcess, opts: Parameters<typeof setupOrg>[1]): Promise<OrgSetup> {
  return setupOrg({ http: gw.http } as unknown as TestApp, opts);
}

export interface PgServerProcess {
  url: string;
  port: number;
  pid: number;
  /** stops PostgreSQL (the data is kept); resolves on the script's {"stopped":true} */
  stopServer(): Promise<void>;
  /** starts it again on the same port and data; resolves on {"started":true} */
  startServer(): Promise<void>;
  /**
   * Leak-scans the database (the server started again first if it is stopped), then ends the script (which stops
   * PostgreSQL and deletes a non-persistent data folder) whatever the scan found, and throws its findings.
   */
  close(): Promise<void>;
}

/** A dedicated embedded PostgreSQL (scripts/pg-server.mjs) whose server a test can take away and give back. */
export async function startPgServer(dataDir: string, timeoutMs = 60_000): Promise<PgServerProcess> {
  const child = spawn(process.execPath, [PG_SERVER], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, PG_DATA_DIR: dataDir, PG_PERSISTENT: '0', PG_FAST: '1', PG_PORT: '0' },
  });
  const exited = track(child);
  teeChildToRunLog(child, 'pg-server (scripts/pg-server.mjs)', { privateStdout: true });
  const stderr: string[] = [];
  child.stderr!.setEncoding('utf8').on('data', (c: string) => stderr.push(c));
  const waiters: { match: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void; reject: (e: Error) => void }[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    const i = waiters.findIndex((w) => w.match(msg) || 'error' in msg);
    if (i < 0) return;
    const [w] = waiters.splice(i, 1);
    if ('error' in msg) w.reject(new Error(`pg-server: ${String(msg.error)}`));
    else w.resolve(msg);
  });
  void exited.then(({ code }) => {
    for (const w of waiters.splice(0)) w.reject(new Error(`pg-server exited (code ${String(code)}): ${stderr.join('')}`));
  });
  const next = (match: (l: Record<string, unknown>) => boolean, what: string): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`pg-server: no ${what} within ${timeoutMs} ms`)), timeoutMs);
      waiters.push({
        match,
        resolve: (l) => {
          clearTimeout(timer);
          resolve(l);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
    });
  const first = await next((l) => typeof l.url === 'string', 'url line');
  const url = first.url as string;
  let serving = true;
  const stopServer = async (): Promise<void> => {
    const done = next((l) => l.stopped === true, '{"stopped":true}');
    child.stdin!.write('stop\n');
    await done;
    serving = false;
  };
  const startServer = async (): Promise<void> => {
    const done = next((l) => l.started === true, '{"started":true}');
    child.stdin!.write('start\n');
    await done;
    serving = true;
  };
  return {
    url,
    port: first.port as number,
    pid: child.pid!,
    stopServer,
    startServer,
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // The run-wide scan reads only DATABASE_URL's database, and this one is deleted with its folder: scanned now.
      try {
        if (!serving) await startServer();
        await expectNoLeaksIn(url, `the dedicated PostgreSQL of ${dataDir} before its deletion`);
      } finally {
        child.stdin!.end();
        await exited;
      }
    },
  };
}

/** `p`, or an error naming `what` if it has not settled within `ms`. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
