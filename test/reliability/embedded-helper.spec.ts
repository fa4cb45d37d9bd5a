/**
 * The embedded PostgreSQL's helper (scripts/pg-server.mjs), which starts PostgreSQL again when it dies, must itself
 * outlive what it writes, and the gateway must not outlive it unnoticed. It shares the gateway's stderr: with that
 * stderr's reader gone (the gateway keeps serving: its log is stdout), a postmaster killed (the OOM killer) made the
 * helper write "exited on its own" into the dead pipe, and it died of the EPIPE instead of restarting PostgreSQL; the
 * gateway then answered 503 for good, with nothing for a supervisor to see. Now the helper drops such lines, and a
 * gateway whose helper dies anyway stops (drained, exit 1) for its supervisor to start it again.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { trackChild } from '../support/child-processes.js';
import { childrenOf, postmasterOf } from '../support/embedded-processes.js';
import { gatewayEnv } from '../support/gateway-process.js';
import { teeChildToRunLog } from '../support/run-log.js';
import { sleep, statusOf, waitFor } from './support.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = fileURLToPath(new URL('../../dist/src/main.js', import.meta.url));
const base = mkdtempSync(join(tmpdir(), 'embedded-helper-'));
process.once('exit', () => rmSync(base, { recursive: true, force: true }));
chmodSync(base, 0o755); // reachable by the postgres system user when the suite runs as root

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};


describe('the embedded PostgreSQL helper', () => {
  let child: ChildProcess | undefined;
  const postmasters: number[] = [];
  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(20_000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    for (const pid of postmasters.splice(0)) if (alive(pid)) process.kill(pid, 'SIGKILL'); // one a dead helper left
    await sleep(300);
  }, 60_000);

  /** The gateway on its embedded database in `dataDir`; its stderr kept (until a test closes it). */
  async function start(dataDir: string): Promise<{ url: string; helper: number; postmaster: number; stderr: () => string }> {
    child = spawn(process.execPath, [MAIN], { cwd: ROOT, env: gatewayEnv({ DATABASE_URL: undefined, DATA_DIR: dataDir }), stdio: ['ignore', 'pipe', 'pipe'] });
    trackChild(child);
    teeChildToRunLog(child, 'gateway (dist/src/main.js, embedded helper)');
    let err = '';
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
    await waitFor(() => /listening on http:\/\/\S+/.test(out) || child!.exitCode !== null, 'the gateway listening', 90_000);
    const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
    expect(url, err).toBeDefined();
    const postmaster = postmasterOf(join(dataDir, 'pg')).pid;
    postmasters.push(postmaster);
    const helper = childrenOf(child.pid!).find((pid) => childrenOf(pid).includes(postmaster));
    expect(helper).toBeDefined();
    return { url: url!, helper: helper!, postmaster, stderr: () => err };
  }

  it("whose stderr's reader is gone still starts a killed PostgreSQL again: the gateway is ready again by itself", async () => {
    const dataDir = join(base, 'stderr-gone');
    const { url, helper, postmaster } = await start(dataDir);
    expect(await statusOf(`${url}/readyz`)).toBe(200);
    child!.stderr!.destroy(); // the reader of the gateway's stderr, and so of the helper's, goes away
    await sleep(200);
    process.kill(postmaster, 'SIGKILL');
    let ready = false;
    for (let i = 0; i < 60 && !ready; i++) {
      await sleep(500);
      ready = (await statusOf(`${url}/readyz`)) === 200;
    }
    if (existsSync(join(dataDir, 'pg', 'postmaster.pid'))) postmasters.push(postmasterOf(join(dataDir, 'pg')).pid);
    // Before: { ready: false, helper: false } — the helper died of EPIPE writing that PostgreSQL had exited.
    expect({ ready, helper: alive(helper), gatewayExit: child!.exitCode }).toEqual({ ready: true, helper: true, gatewayExit: null });
  }, 150_000);

  it('killed: the gateway says so and stops, drained, exit 1 (a supervisor starts it again), instead of serving on with nothing to restart PostgreSQL', async () => {
    const { helper, stderr } = await start(join(base, 'helper-killed'));
    const exited = once(child!, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    process.kill(helper, 'SIGKILL');
    const [code, signal] = await Promise.race([exited, sleep(30_000).then(() => ['still running', null] as const)]);
    expect({ code, signal }, stderr()).toEqual({ code: 1, signal: null });
    expect(stderr()).toMatch(/fatal: the embedded PostgreSQL's helper exited \(code null, signal SIGKILL\): nothing would start PostgreSQL again; stopping/);
  }, 120_000);

  it('killed during start-up (the migrations, the sweeps): the gateway stops too (exit 1), instead of going on to listen with no helper', async () => {
    const dataDir = join(base, 'helper-killed-early');
    child = spawn(process.execPath, [MAIN], { cwd: ROOT, env: gatewayEnv({ DATABASE_URL: undefined, DATA_DIR: dataDir }), stdio: ['ignore', 'pipe', 'pipe'] });
    trackChild(child);
    teeChildToRunLog(child, 'gateway (dist/src/main.js, embedded helper killed early)');
    let err = '';
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
    child.stdout!.resume();
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    // On the line said once the embedded PostgreSQL serves, before createGateway (migrations, sweeps) has returned.
    await waitFor(() => /embedded PostgreSQL started/.test(err) || child!.exitCode !== null, 'the embedded PostgreSQL started', 90_000, 1);
    const postmaster = postmasterOf(join(dataDir, 'pg')).pid;
    postmasters.push(postmaster);
    const helper = childrenOf(child.pid!).find((pid) => childrenOf(pid).includes(postmaster));
    expect(helper).toBeDefined();
    process.kill(helper!, 'SIGKILL');
    const [code, signal] = await Promise.race([exited, sleep(60_000).then(() => ['still running', null] as const)]);
    // Before: still running, listening and serving, with nothing to start PostgreSQL again.
    expect({ code, signal }, err).toEqual({ code: 1, signal: null });
    expect(err).toMatch(/fatal: the embedded PostgreSQL's helper exited \(code null, signal SIGKILL\)/);
  }, 150_000);
});
