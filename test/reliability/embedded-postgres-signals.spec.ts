/**
 * The embedded PostgreSQL of `npm start` (no DATABASE_URL) under the signals a supervisor really sends:
 * - systemd's default KillMode=control-group signals every process of the service at once (gateway, pg-server.mjs,
 *   postgres): the database must outlive the gateway's drain, so the call at the vendor is answered and recorded;
 * - kill -9 of the gateway and of pg-server (the OOM killer) leaves postgres running with no parent: the next start
 *   on the same DATA_DIR must stop that orphan and serve, not refuse the folder for ever;
 * - a postgres whose parent is alive (another gateway on the folder) is never stopped: the second start refuses.
 * One data folder for the three (initdb costs seconds), in order.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { startGatewayProcess, setupOrgVia, within, type GatewayProcess } from '../support/gateway-process.js';
import { teeChildToRunLog } from '../support/run-log.js';
import { expectNoLeaksIn } from '../support/scratch-database.js';
import { emulatorEnv, toolUse } from '../support/scenario.js';
import { adminAuth } from '../support/test-app.js';
import { postToolUse, waitFor } from './support.js';
import { childrenOf, postmasterOf } from '../support/embedded-processes.js';

const dataDir = resolve('.tmp', `embedded-signals-${process.pid}-${Date.now()}`);
const pgDir = join(dataDir, 'pg');

const postmasterPid = (): number => postmasterOf(pgDir).pid;
/** The gateway's embedded database as pg-server.mjs serves it (user, password, database), on the port postmaster.pid names. */
const embeddedUrl = (): string =>
  `postgres://postgres:${readFileSync(`${pgDir}.password`, 'utf8').trim()}@127.0.0.1:${postmasterOf(pgDir).port}/tool_gateway`;
/** Alive and not a zombie (an exited orphan stays a zombie until PID 1 reaps it). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}
/** The gateway's pg-server.mjs child: the one whose child is the postmaster. */
const pgServerOf = (gw: GatewayProcess, postmaster: number): number | undefined =>
  childrenOf(gw.pid).find((c) => childrenOf(c).includes(postmaster));

describe('embedded PostgreSQL under supervisor signals', () => {
  let emu: VendorEmulator;
  let gw: GatewayProcess | undefined;
  const env = (): Record<string, string | undefined> => ({ ...emulatorEnv(emu.url), DATABASE_URL: undefined, DATA_DIR: dataDir, VENDOR_TIMEOUT_MS: '10000' });
  /** postmasters this file saw, stopped at the end whatever happened (an orphan outlives every test process). */
  const seen = new Set<number>();
  /**
   * The run-wide scan reads only DATABASE_URL's database, and this one is deleted with dataDir: it is scanned while
   * a gateway still serves it, once (by the last test, or after a failed one by afterAll).
   */
  let scanned = false;
  const expectNoLeaks = async (): Promise<void> => {
    if (scanned) return;
    scanned = true;
    await expectNoLeaksIn(embeddedUrl(), `the embedded database of ${dataDir}`);
  };

  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
  });
  afterAll(async () => {
    try {
      if (gw) await expectNoLeaks();
    } finally {
      await gw?.stop(5_000);
      for (const pid of seen) if (running(pid)) process.kill(pid, 'SIGINT');
      await emu?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('SIGTERM to every process of the service (systemd KillMode=control-group) while a call is at the vendor: answered 200 and recorded succeeded, exit 0, no postgres left', async () => {
    gw = await startGatewayProcess(env(), 120_000);
    const org = await setupOrgVia(gw, { tools: ['order_lookup.lookup'] });
    await gw.logMetrics(); // a signal ends it below (stop() would find it dead): /metrics to the run log now, not during the drain
    emu.reset();
    emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 2_000, times: 1 });
    const inFlight = postToolUse(gw.http, org.runId, org.agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' })).then((r) => r);
    await waitFor(() => emu.count({ vendor: 'shopify' }) === 1, 'the lookup to be at the vendor');
    const postmaster = postmasterPid();
    seen.add(postmaster);
    const server = pgServerOf(gw, postmaster);
    expect(server, 'pg-server child').toBeDefined();

    for (const pid of [gw.pid, server!, postmaster]) process.kill(pid, 'SIGTERM');
    const exit = await within(gw.waitExit(), 30_000, 'the gateway to exit');
    const answer = await inFlight;
    const output = gw.output();
    gw = undefined;
    expect({ exit, status: answer.status, body: answer.body.status ?? answer.body.code }, output.slice(-3000)).toEqual({
      exit: { code: 0, signal: null },
      status: 200,
      body: 'succeeded',
    });
    // the gateway waited for its database to stop: nothing of it is left
    expect({ pgServer: running(server!), postgres: running(postmaster), lockFile: existsSync(join(pgDir, 'postmaster.pid')) }).toEqual({
      pgServer: false,
      postgres: false,
      lockFile: false,
    });

    gw = await startGatewayProcess(env(), 120_000);
    const stored = await gw.http.get(`/v1/tool-calls/${answer.body.toolCallId as string}`).set(adminAuth);
    expect(stored.status).toBe(200);
    expect(stored.body).toMatchObject({ status: 'succeeded' });
  }, 300_000);

  it('kill -9 of the gateway and of pg-server leaves postgres orphaned: a restart on the same DATA_DIR stops it and serves', async () => {
    gw ??= await startGatewayProcess(env(), 120_000);
    await gw.logMetrics(); // SIGKILL below ends it, so stop() cannot: its /metrics for the run-wide scan now
    const orphan = postmasterPid();
    seen.add(orphan);
    const server = pgServerOf(gw, orphan);
    expect(server, 'pg-server child').toBeDefined();
    process.kill(server!, 'SIGKILL');
    gw.kill('SIGKILL');
    await gw.waitExit();
    gw = undefined;
    await waitFor(() => !running(server!), 'pg-server to be gone');
    expect(running(orphan), 'postgres outlives its killed parent').toBe(true);

    gw = await startGatewayProcess(env(), 60_000);
    expect(gw.output()).toMatch(/stopping PostgreSQL \(pid \d+\) left running/);
    expect((await gw.http.get('/readyz')).status).toBe(200);
    expect(running(orphan)).toBe(false);
    const postmaster = postmasterPid();
    seen.add(postmaster);
    expect(postmaster).not.toBe(orphan);
  }, 240_000);

  it('a postgres whose parent is alive (another gateway on the folder) is not stopped: the second start refuses', async () => {
    gw ??= await startGatewayProcess(env(), 120_000);
    const postmaster = postmasterPid();
    seen.add(postmaster);
    const second = spawn(process.execPath, ['scripts/pg-server.mjs'], {
      env: { ...process.env, PG_DATA_DIR: pgDir, PG_PERSISTENT: '1', PG_PARENT_STOPS: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    teeChildToRunLog(second, 'pg-server.mjs (second start on a folder in use)', { privateStdout: true });
    let err = '';
    second.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const [code] = (await within(once(second, 'exit'), 60_000, 'the second pg-server to exit')) as [number];
    expect(code, err).toBe(1);
    expect(err).toMatch(/postmaster\.pid exists: is another gateway/);
    expect(err).not.toMatch(/stopping PostgreSQL/);
    expect(running(postmaster)).toBe(true);
    expect(postmasterPid()).toBe(postmaster);
    expect((await gw.http.get('/readyz')).status).toBe(200);

    await expectNoLeaks();
    await gw.stop();
    expect((await gw.waitExit()).code).toBe(0);
    gw = undefined;
    expect(running(postmaster)).toBe(false);
  }, 180_000);
});
