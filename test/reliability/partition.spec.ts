import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { emulatorEnv, setupOrg, toolUse, type OrgSetup } from '../support/scenario.js';
import { DEFAULT_QUERY_TIMEOUT_MS } from '../../src/db/session-settings.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { bearer, startTestApp, type TestApp } from '../support/test-app.js';
import { startGatewayProcess, setupOrgVia, within, type GatewayProcess } from '../support/gateway-process.js';
import { postToolUse, waitFor } from './support.js';

/**
 * A network partition between the gateway and PostgreSQL: the database stops
 * answering but no connection is closed, so neither the server's
 * statement_timeout nor a refused connection ever tells the gateway. Calls
 * must still end (503 DATABASE_UNAVAILABLE after DB_QUERY_TIMEOUT_MS) instead
 * of hanging, nothing reaches the vendor unrecorded, and the gateway serves
 * again once the network is back.
 */
describe('database partition (silence, not refusal)', () => {
  let emu: VendorEmulator;
  let proxy: TcpProxy;
  let t: TestApp;
  let org: OrgSetup;

  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    const db = new URL(process.env.DATABASE_URL!);
    proxy = await startTcpProxy(db.hostname, Number(db.port || 5432));
    const viaProxy = new URL(db.toString());
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    t = await startTestApp({ ...emulatorEnv(emu.url), DATABASE_URL: viaProxy.toString(), DB_QUERY_TIMEOUT_MS: '2000', VENDOR_TIMEOUT_MS: '2000' });
    org = await setupOrg(t, { tools: ['order_lookup.lookup'] });
  }, 60_000);
  afterAll(async () => {
    proxy?.blackhole(false);
    await t?.close();
    await proxy?.close();
    await emu?.stop();
  });

  const lookup = (orderId: string) => t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId }));

  it('calls end with 503 DATABASE_UNAVAILABLE instead of hanging, the vendor is not called, and the gateway recovers', async () => {
    expect((await lookup('12345')).body.status).toBe('succeeded');
    const vendorCalls = () => emu.count({ vendor: 'shopify' });
    const before = vendorCalls();

    proxy.blackhole(true);
    const t0 = performance.now();
    const during = await Promise.all([lookup('1001'), lookup('1002'), t.http.get('/v1/tool-calls').set(bearer(org.adminKey))]);
    const elapsed = performance.now() - t0;
    for (const res of during) {
      expect(res.status, res.text).toBe(503);
      expect(res.body).toMatchObject({ code: 'DATABASE_UNAVAILABLE' });
    }
    expect(elapsed).toBeLessThan(15_000); // DB_QUERY_TIMEOUT_MS (2 s) or the 3 s connect timeout, not forever
    expect(vendorCalls()).toBe(before); // the intent could not be recorded, so nothing was sent

    proxy.blackhole(false);
    await waitFor(async () => (await lookup('1002')).body.status === 'succeeded', 'a call to succeed again', 20_000, 250);
  }, 60_000);
});

/**
 * README "Stopping": the process always ends by itself, within the grace it documents. With the database silent
 * at the stop (a partition: nothing refused, every query waits out DB_QUERY_TIMEOUT_MS, 20 s), each shutdown hook that
 * touched it waited one query timeout, module after module — and the periodic tasks whose hooks came later (the
 * approvals sweep every 5 s, the approvals gauge every 15 s) started new runs during those waits, each one more
 * timeout to wait for. An idle gateway took two query timeouts or more to exit with the defaults (20 s each), past a 30 s grace period. From
 * the drain on no periodic task starts a run (ShutdownPhase): the waits overlap, one query timeout in all.
 */
describe('a stop while the database is silent', () => {
  let emu: VendorEmulator;
  let proxy: TcpProxy;
  let gw: GatewayProcess | undefined;

  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    const db = new URL(process.env.DATABASE_URL!);
    proxy = await startTcpProxy(db.hostname, Number(db.port || 5432));
  }, 60_000);
  afterAll(async () => {
    proxy?.blackhole(false);
    await gw?.stop();
    await proxy?.close();
    await emu?.stop();
  }, 120_000);

  it('an idle gateway (default DB_QUERY_TIMEOUT_MS, 20 s) exits 0 within one query timeout and a 5 s margin, not a timeout per hook', async () => {
    const viaProxy = new URL(process.env.DATABASE_URL!);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    gw = await startGatewayProcess({ ...emulatorEnv(emu.url), DATABASE_URL: viaProxy.toString() });
    const org = await setupOrgVia(gw, { tools: ['order_lookup.lookup'] });
    // Keys used: lastUsedAt has something to flush at the stop.
    for (const orderId of ['12345', '12345']) expect((await postToolUse(gw.http, org.runId, org.agentKey, toolUse('order_lookup', { action: 'lookup', orderId }))).status).toBe(200);
    proxy.blackhole(true);
    const t0 = performance.now();
    gw.kill('SIGTERM');
    const exit = await within(gw.waitExit(), 90_000, 'the gateway to exit');
    const tookMs = performance.now() - t0;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(tookMs, gw.output().split('\n').slice(-12).join('\n')).toBeLessThan(DEFAULT_QUERY_TIMEOUT_MS + 5_000);
  }, 180_000);
});
