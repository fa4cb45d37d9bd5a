/**
 * How a gateway started as the README says gets stopped. `npm start` stopped with a SIGTERM to npm alone — what
 * `timeout`, an IDE's stop button, a process manager, or systemd with `ExecStart=npm start` send: npm forwards it to
 * its child, `sh -c "…"`, and dash does not exec its last command, so without `exec` in the start script the shell
 * died and the gateway was orphaned, never signalled: it kept serving, kept the port and its embedded PostgreSQL,
 * and the next `npm start` refused. And a closed terminal (SIGHUP) killed the gateway undrained.
 *
 * Runs the package's own start script (`--ignore-scripts` skips only the prestart build) on the test database.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { gatewayEnv, startGatewayProcess } from '../support/gateway-process.js';
import { teeChildToRunLog } from '../support/run-log.js';

function children(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}
/** node dist/src/main.js somewhere under `pid` */
function findGateway(pid: number): number | undefined {
  for (const c of children(pid)) {
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${c}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (cmd.includes('dist/src/main.js') && !cmd.startsWith('sh')) return c;
    const deeper = findGateway(c);
    if (deeper) return deeper;
  }
  return undefined;
}

describe('stop signals reach the gateway, which drains (README "Stopping")', () => {
  it('a SIGTERM to `npm start` alone (timeout, an IDE, a process manager) reaches the gateway: it drains and exits, no orphan left serving', async () => {
    const npm = spawn('npm', ['start', '--ignore-scripts'], {
      env: gatewayEnv({ DATA_DIR: '.tmp/data-npm-start' }),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    npm.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    npm.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const deadline = Date.now() + 30_000;
    while (!/listening on/.test(out) && Date.now() < deadline) await sleep(100);
    expect(out).toMatch(/listening on/);
    const gateway = findGateway(npm.pid!);
    expect(gateway, out).toBeDefined();
    try {
      const npmExit = once(npm, 'exit');
      npm.kill('SIGTERM');
      await npmExit;
      for (let i = 0; i < 100 && alive(gateway!); i++) await sleep(100);
      // Before `exec` in the start script: npm exited at once, the gateway stayed alive (re-parented to PID 1), still
      // serving, and its output never showed "SIGTERM received, shutting down".
      expect(alive(gateway!), out).toBe(false);
      expect(out).toContain('SIGTERM received, shutting down');
    } finally {
      if (alive(gateway!)) process.kill(gateway!, 'SIGKILL');
    }
  }, 60_000);

  it('SIGHUP (the terminal or SSH session closed) drains and exits 0, like SIGTERM and Ctrl-C', async () => {
    const gw = await startGatewayProcess({}, 30_000, { group: true });
    gw.killGroup('SIGHUP');
    const exit = await gw.waitExit();
    // Before: { code: null, signal: 'SIGHUP' } — Node's default, no drain (a call at its vendor never recorded).
    expect(exit, gw.output().slice(-500)).toEqual({ code: 0, signal: null });
    expect(gw.output()).toContain('SIGHUP received, shutting down');
  }, 60_000);

  it('a SIGTERM while the gateway’s modules are still loading is handled (Node as PID 1 ignored it): exit 0, never listening', async () => {
    // The gateway's modules take seconds to load on a loaded machine. A loader hook marks when @nestjs/core is
    // asked for and holds it 2 s: the signal is sent at the mark, while they load. Before, the handlers were
    // installed only once every module had loaded: outside a container the SIGTERM killed the process undrained
    // ({ signal: 'SIGTERM' }); as PID 1 (a container without --init, every Kubernetes pod) it was ignored, and the
    // gateway migrated, swept and served until the SIGKILL.
    const dir = join(process.cwd(), '.tmp', 'slow-module-load');
    mkdirSync(dir, { recursive: true });
    const mark = join(dir, 'loading');
    rmSync(mark, { force: true });
    writeFileSync(
      join(dir, 'hooks.mjs'),
      "import { writeFileSync } from 'node:fs';\n" +
        'export async function resolve(specifier, context, next) {\n' +
        `  if (specifier === '@nestjs/core') { writeFileSync(${JSON.stringify(mark)}, ''); await new Promise((r) => setTimeout(r, 2000)); }\n` +
        '  return next(specifier, context);\n}\n',
    );
    writeFileSync(join(dir, 'register.mjs'), "import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n");
    const child = spawn(process.execPath, ['--import', join(dir, 'register.mjs'), 'dist/src/main.js'], {
      env: gatewayEnv({ DATA_DIR: '.tmp/data-early-sigterm' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    teeChildToRunLog(child, 'gateway (dist/src/main.js, its modules loading slowly)');
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    const startedAt = Date.now();
    while (!existsSync(mark) && Date.now() - startedAt < 30_000) await sleep(10);
    expect(existsSync(mark), 'the gateway to start loading @nestjs/core').toBe(true);
    child.kill('SIGTERM');
    const [code, signal] = await exited;
    expect({ code, signal }, out.slice(-500)).toEqual({ code: 0, signal: null });
    expect(out).toContain('SIGTERM received, shutting down');
    expect(out).not.toMatch(/listening on/);
  }, 60_000);
});
