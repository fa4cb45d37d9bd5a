/**
 * The embedded PostgreSQL's postmaster killed under a running gateway (the OOM killer, a kill -9), the gateway itself
 * fine (OS limits review): before, it stayed up and unready for good, every call refused 503, nothing restarting
 * anything (its own process never exits, so no supervisor restarts it). scripts/pg-server.mjs now starts PostgreSQL
 * again, and the gateway's pool reconnects by itself.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { childrenOf, postmasterOf } from '../support/embedded-processes.js';
import { startGatewayProcess, setupOrgVia, type GatewayProcess } from '../support/gateway-process.js';
import { emulatorEnv, toolUse } from '../support/scenario.js';
import { postToolUse, sleep } from './support.js';

const base = mkdtempSync(join(tmpdir(), 'postmaster-killed-'));
// Also when none of the file's tests runs (-t, runIf): vitest then skips its afterAll.
process.once('exit', () => rmSync(base, { recursive: true, force: true }));
chmodSync(base, 0o755); // reachable by the postgres system user when the suite runs as root

const pgDir = join(base, 'pg'); // where main.ts keeps the embedded cluster of DATA_DIR=base

describe('the embedded postmaster killed under a running gateway', () => {
  let gw: GatewayProcess | undefined;
  let emu: VendorEmulator | undefined;
  afterAll(async () => {
    await gw?.stop();
    await emu?.stop();
    rmSync(base, { recursive: true, force: true });
  }, 60_000);

  it('PostgreSQL is started again and the gateway is ready and serving calls by itself, without a restart', async () => {
    emu = createFullEmulator();
    await emu.start();
    gw = await startGatewayProcess({ ...emulatorEnv(emu.url), DATABASE_URL: undefined, DATA_DIR: base }, 90_000);
    let exited = false;
    void gw.waitExit().then(() => (exited = true));
    const org = await setupOrgVia(gw, { tools: ['order_lookup.lookup'] });
    const postmaster = postmasterOf(pgDir).pid;
    const pgServer = childrenOf(gw.pid).find((pid) => childrenOf(pid).includes(postmaster));
    expect(pgServer).toBeDefined();
    process.kill(postmaster, 'SIGKILL');
    let ready = false;
    for (let i = 0; i < 60 && !ready; i++) {
      await sleep(500);
      expect(exited, 'the gateway keeps running').toBe(false);
      ready = (await gw.http.get('/readyz')).status === 200;
    }
    expect(ready).toBe(true);
    expect(gw.output()).toMatch(/PostgreSQL exited on its own \(code null, signal SIGKILL\); starting it again/);
    const restarted = postmasterOf(pgDir).pid;
    expect(restarted).not.toBe(postmaster);
    expect(childrenOf(pgServer!)).toContain(restarted);
    const call = await postToolUse(gw.http, org.runId, org.agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect([call.status, call.body.status]).toEqual([200, 'succeeded']);
  }, 150_000);
});
