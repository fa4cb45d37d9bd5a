/**
 * What becomes of the gateway's stdout (its JSON log) and stderr never stops it (src/logging/output-streams.ts).
 * Before, nothing handled an 'error' on either stream: a reader gone (a log shipper restarted, `npm start | tee` whose
 * tee died: EPIPE) or a log file that could grow no more (a full disk, a file-size limit: EFBIG) crashed the gateway at
 * its next line, exit 1, undrained, a write at its vendor left `running`; a stalled reader made Node queue every line in
 * memory without bound; a closed terminal (SIGHUP, then a write to the hung-up tty) crashed it within 100 ms instead of
 * the drain the README promises. The gateway runs built, as production runs it (dist/src/main.js).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import request from 'supertest';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { MAX_QUEUED } from '../../src/logging/output-streams.js';
import { trackChild } from '../support/child-processes.js';
import { childrenOf } from '../support/embedded-processes.js';
import { gatewayEnv, setupOrgVia, type GatewayProcess } from '../support/gateway-process.js';
import { teeChildToRunLog } from '../support/run-log.js';
import { emulatorEnv, toolUse } from '../support/scenario.js';
import { openDb, postToolUse, rows, sleep, statusOf, waitFor } from './support.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = fileURLToPath(new URL('../../dist/src/main.js', import.meta.url));
const base = mkdtempSync(join(tmpdir(), 'output-sinks-'));
process.once('exit', () => rmSync(base, { recursive: true, force: true }));
let dirs = 0;
const dataDir = (): string => join(base, `data-${++dirs}`);

interface Spawned {
  child: ChildProcess;
  url: string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** dist/src/main.js with its stdout and stderr piped here, where a test may stop reading them or close them. */
async function spawnGateway(overrides: Record<string, string | undefined> = {}): Promise<Spawned> {
  const child = spawn(process.execPath, [MAIN], { cwd: ROOT, env: gatewayEnv({ DATA_DIR: dataDir(), ...overrides }), stdio: ['ignore', 'pipe', 'pipe'] });
  trackChild(child);
  teeChildToRunLog(child, 'gateway (dist/src/main.js, output sinks)');
  const exited = once(child, 'exit').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }));
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (c: Buffer): void => {
      out += c.toString('utf8');
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        child.stdout!.off('data', onData);
        resolve(m[1]);
      }
    };
    child.stdout!.on('data', onData);
    void exited.then(({ code }) => reject(new Error(`exited during start-up (${String(code)}): ${err}`)));
  });
  return { child, url, stderr: () => err, exited };
}


async function droppedMetric(url: string, stream: 'stdout' | 'stderr'): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(new RegExp(`^log_lines_dropped_total\\{stream="${stream}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
}

describe('a gateway whose output cannot be written', () => {
  let gw: Spawned | undefined;
  let emu: VendorEmulator;
  let db: pg.Pool;
  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    db = openDb();
  });
  afterEach(async () => {
    if (gw && gw.child.exitCode === null && gw.child.signalCode === null) {
      gw.child.kill('SIGKILL');
      await gw.exited;
    }
    gw = undefined;
  });
  afterAll(async () => {
    await db?.end();
    await emu?.stop();
    rmSync(base, { recursive: true, force: true });
  });

  it('stdout closed while a write is at its vendor: the write is answered and recorded succeeded, the gateway serves on, counts the lost lines, and drains at SIGTERM (exit 0)', async () => {
    gw = await spawnGateway({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '8000' });
    const http = request(gw.url);
    const org = await setupOrgVia({ http } as unknown as GatewayProcess, { tools: ['shopify_order.add_note'] });
    const orderUpdates = () => emu.requests.filter((r) => r.vendor === 'shopify' && r.body.includes('orderUpdate'));
    emu.fault({ vendor: 'shopify', bodyMatch: /orderUpdate/, kind: 'delay_after', delayMs: 2_000 });
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: 'output sinks note' });
    const inFlight = postToolUse(http, org.runId, org.agentKey, use).then(
      (r) => ({ status: r.status, body: r.body as { status?: string } }),
      (e: unknown) => ({ error: String(e) }),
    );
    await waitFor(() => orderUpdates().some((r) => r.applied), 'the note to reach the vendor');
    gw.child.stdout!.destroy(); // the log's reader goes away
    await sleep(100);
    expect(await statusOf(`${gw.url}/v1/tool-calls`)).toBe(401); // a request that logs a line: EPIPE
    const answer = await inFlight;
    const [row] = await rows<{ status: string }>(db, 'SELECT status FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2', [org.runId, use.id]);
    // Before: the agent's answer "socket hang up", the row left `running`, the gateway gone (exit 1).
    expect({ answer, row, exit: gw.child.exitCode }).toMatchObject({ answer: { status: 200, body: { status: 'succeeded' } }, row: { status: 'succeeded' }, exit: null });
    expect(await statusOf(`${gw.url}/v1/tool-calls`)).toBe(401);
    expect(await droppedMetric(gw.url, 'stdout')).toBeGreaterThan(0);
    expect(gw.stderr()).toMatch(/stdout cannot be written \(EPIPE\): log lines are dropped from now on/);
    gw.child.kill('SIGTERM');
    expect((await gw.exited).code).toBe(0);
  }, 60_000);

  it('stderr closed: a SIGTERM (whose line goes to stderr) still drains and exits 0', async () => {
    gw = await spawnGateway();
    gw.child.stderr!.destroy();
    await sleep(100);
    gw.child.kill('SIGTERM');
    // Before: exit 1, crashed on "SIGTERM received, shutting down".
    expect(await gw.exited).toEqual({ code: 0, signal: null });
  }, 60_000);

  it('stdout a log file that can grow no more (a file-size limit, as a full disk): every request is still answered', async () => {
    const log = join(base, `full-${process.pid}.log`);
    // `npm start > gateway.log` under a 64 KiB file-size limit (Node ignores SIGXFSZ: the write fails EFBIG).
    const child = spawn('bash', ['-c', 'ulimit -f 64 && exec "$0" "$1" > "$2"', process.execPath, MAIN, log], {
      cwd: ROOT,
      env: gatewayEnv({ DATA_DIR: dataDir() }),
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    trackChild(child);
    teeChildToRunLog(child, 'gateway (dist/src/main.js, stdout a full file)');
    let err = '';
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (err += c));
    try {
      let url: string | undefined;
      for (let i = 0; i < 600 && !url; i++) {
        await sleep(100);
        url = /listening on (http:\/\/\S+)/.exec(readFileSync(log, 'utf8'))?.[1];
      }
      expect(url, err).toBeDefined();
      const seen = new Set<number | string>();
      for (let i = 0; i < 300; i++) seen.add(await statusOf(`${url}/v1/tool-calls`));
      expect(statSync(log).size).toBe(64 * 1024); // full
      await sleep(200);
      seen.add(await statusOf(`${url}/v1/tool-calls`));
      expect([...seen], err.slice(0, 600)).toEqual([401]);
      expect(err).toMatch(/stdout cannot be written \(EFBIG\)/);
      expect(child.exitCode).toBeNull();
    } finally {
      child.kill('SIGKILL');
    }
  }, 90_000);

  it('a reader that stalls: lines past MAX_QUEUED bytes are dropped and counted, not queued in memory without bound; the count is said when it reads again', async () => {
    gw = await spawnGateway();
    gw.child.stdout!.pause(); // the 64 KiB pipe fills, then Node queues what the gateway writes
    // 1,500 lines of ~14 kB (the logged path; a client with no key can send it): ~21 MB queued before.
    const path = `/v1/tool-calls/${'a'.repeat(14_000)}`;
    let next = 0;
    const statuses = new Set<number | string>();
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next++ < 1_500) statuses.add(await statusOf(`${gw!.url}${path}`));
      }),
    );
    expect([...statuses]).toEqual([401]);
    expect(await droppedMetric(gw.url, 'stdout')).toBeGreaterThan(0);
    let held = 0;
    let lastData = Date.now();
    gw.child.stdout!.on('data', (c: Buffer) => {
      held += c.length;
      lastData = Date.now();
    });
    gw.child.stdout!.resume();
    while (Date.now() - lastData < 1_500) await sleep(100);
    // What it delivers once read again: at most what it may queue, the pipe's 64 kB and one line over.
    expect(held).toBeLessThan(MAX_QUEUED + 256 * 1024);
    await waitFor(() => /\d+ line\(s\) dropped while stdout's reader fell more than \d+ bytes behind/.test(gw!.stderr()), 'the drop said on stderr');
    expect(await statusOf(`${gw.url}/v1/tool-calls`)).toBe(401);
  }, 90_000);

  it('a closed terminal (SIGHUP, the tty hung up): the gateway drains, /readyz 503 for SHUTDOWN_DELAY_MS, instead of dying at once', async () => {
    // The gateway on a pseudo-terminal of its own, as `npm start` in a terminal window: script(1) (util-linux) runs it
    // as the terminal's controlling process; killing script closes the terminal, and the kernel sends the SIGHUP.
    const env = gatewayEnv({ DATA_DIR: dataDir(), SHUTDOWN_DELAY_MS: '3000' });
    const term = spawn('script', ['-qfec', `exec "${process.execPath}" "${MAIN}"`, '/dev/null'], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
    trackChild(term);
    teeChildToRunLog(term, 'gateway on a terminal (script)');
    let out = '';
    term.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
    let gateway = 0;
    const alive = (): boolean => {
      try {
        process.kill(gateway, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      await waitFor(() => /listening on http:\/\/\S+/.test(out), 'the gateway listening on its terminal', 90_000);
      const url = /listening on (http:\/\/[^\s\r]+)/.exec(out)![1];
      [gateway] = childrenOf(term.pid!);
      expect(gateway).toBeGreaterThan(0);
      expect(await statusOf(`${url}/readyz`)).toBe(200);
      term.kill('SIGKILL'); // the window closes
      await sleep(1_000);
      // Before: the connection refused, the gateway killed by SIGSEGV ~100 ms after the hang-up.
      expect(await statusOf(`${url}/readyz`)).toBe(503);
      expect(alive()).toBe(true);
      await waitFor(() => !alive(), 'the gateway to stop once drained', 30_000);
    } finally {
      term.kill('SIGKILL');
      if (gateway > 0 && alive()) process.kill(gateway, 'SIGKILL');
    }
  }, 120_000);
});
