import { rmSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { startGatewayProcess, setupOrgVia, within, type GatewayProcess } from '../support/gateway-process.js';
import { logRawResponse } from '../support/response-log.js';
import { emulatorEnv, toolUse } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';
import { openDb, postToolUse, rows, sleep, waitFor } from './support.js';

/** GET over a keep-alive agent; resolves with the status. */
function get(url: string, agent: http.Agent): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => {
        logRawResponse('GET', url, res.statusCode ?? 0, res.headers, body); // the run-wide leak scan reads it
        resolve(res.statusCode ?? 0);
      });
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/**
 * SIGTERM (a rolling deploy) while keep-alive clients keep sending: the
 * gateway must not be kept alive by them, and must not cut off the call it
 * has at the vendor.
 */
describe('graceful shutdown', () => {
  let emu: VendorEmulator;
  let db: pg.Pool;
  let gw: GatewayProcess | undefined;

  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    db = openDb();
  });
  afterAll(async () => {
    await gw?.stop();
    await db?.end();
    await emu?.stop();
  });

  it('answers the call in flight with Connection: close, and exits while keep-alive clients are still sending', async () => {
    gw = await startGatewayProcess({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '10000' });
    const org = await setupOrgVia(gw, { tools: ['order_lookup.lookup'] });
    await gw.logMetrics(); // a signal ends it below (stop() would find it dead): /metrics to the run log now, not during the drain
    emu.reset();
    emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 1_500, times: 1 });
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const inFlight = postToolUse(gw.http, org.runId, org.agentKey, use).then((r) => r); // supertest sends on then()
    await waitFor(
      async () => (await rows<{ status: string }>(db, 'SELECT status FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2 AND status = $3', [org.runId, use.id, 'running']))[0],
      'the lookup to be running at the vendor',
    );

    // Four clients on keep-alive sockets, sending back to back for up to 20 s.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    const healthz = `${gw.url}/healthz`;
    let sending = true;
    let answered = 0;
    /** when each client's loop ended (performance.now()); unset while it is still sending */
    const finishedAt: (number | undefined)[] = [];
    const client = async (_: unknown, i: number): Promise<void> => {
      const until = Date.now() + 20_000;
      while (sending && Date.now() < until) {
        try {
          // 200 before SIGTERM; 503 GATEWAY_STOPPING (Connection: close) once the drain has begun: both answered.
          if ([200, 503].includes(await get(healthz, agent))) answered++;
        } catch {
          await sleep(10); // refused once the listener is closed: try again, as a load balancer's health check would
        }
      }
      finishedAt[i] = performance.now();
    };
    const clients = Array.from({ length: 4 }, client);
    await waitFor(() => answered >= 40, 'the keep-alive clients to be going');

    const answeredAtSigterm = answered;
    gw.kill('SIGTERM');
    const exit = await within(gw.waitExit(), 15_000, 'the gateway to exit while its keep-alive clients keep sending');
    const exitedAt = performance.now();
    const answeredAtExit = answered;
    const finishedBeforeExit = finishedAt.filter((t) => t !== undefined && t <= exitedAt).length;
    sending = false;
    await Promise.all(clients);
    agent.destroy();

    expect(exit).toEqual({ code: 0, signal: null });
    // The clients were still sending when the gateway exited (none had given up or run out of time) …
    expect(finishedBeforeExit, 'clients that had stopped sending before the gateway exited').toBe(0);
    expect(finishedAt.filter((t) => t !== undefined)).toHaveLength(4);
    // … and were being answered during the drain: the gateway exited with keep-alive traffic on, not after it.
    expect(answeredAtExit, `answered: ${answeredAtSigterm} at SIGTERM, ${answeredAtExit} at exit`).toBeGreaterThan(answeredAtSigterm);
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    // An answer given while draining says so: the client must not send its next request on a socket about to close.
    expect(answer.headers.connection).toBe('close');
    expect(answer.body).toMatchObject({ status: 'succeeded', replayed: false });
    const [row] = await rows<{ status: string }>(db, 'SELECT status FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2', [org.runId, use.id]);
    expect(row.status).toBe('succeeded');
  }, 60_000);

  it('a write whose client went away is still at the vendor: the shutdown waits for it and records its outcome', async () => {
    gw = await startGatewayProcess({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '10000' });
    const org = await setupOrgVia(gw, { tools: ['shopify_order.add_note'] });
    await gw.logMetrics(); // a signal ends it below (stop() would find it dead): /metrics to the run log now, not during the drain
    emu.reset();
    emu.fault({ vendor: 'shopify', bodyMatch: /orderUpdate/, kind: 'delay_after', delayMs: 1_500, times: 1 });
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: 'written while nobody waits' });
    // The agent gives up after 300 ms (its own timeout) and closes the socket: Node's server.close() no longer waits for it.
    const gaveUp = gw.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).timeout(300).send(use).then(
      () => false,
      () => true,
    );
    await waitFor(() => emu.requests.some((r) => r.body.includes('orderUpdate')), 'the note to reach the vendor');
    expect(await gaveUp).toBe(true);

    gw.kill('SIGTERM');
    const exit = await within(gw.waitExit(), 20_000, 'the gateway to exit');
    expect(exit).toEqual({ code: 0, signal: null });
    const [row] = await rows<{ status: string }>(db, 'SELECT status FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2', [org.runId, use.id]);
    expect(row?.status).toBe('succeeded'); // not left running for the orphan sweep to call indeterminate
  }, 60_000);

  it('a stop signal repeated during the drain (a second Ctrl-C, a supervisor sending again) is ignored: the call at the vendor is still answered and recorded', async () => {
    gw = await startGatewayProcess({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '10000' });
    const org = await setupOrgVia(gw, { tools: ['shopify_order.add_note'] });
    await gw.logMetrics(); // a signal ends it below (stop() would find it dead): /metrics to the run log now, not during the drain
    emu.reset();
    emu.fault({ vendor: 'shopify', bodyMatch: /orderUpdate/, kind: 'delay_after', delayMs: 1_500, times: 1 });
    const use = toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: 'written while stop is pressed twice' });
    const answer = postToolUse(gw.http, org.runId, org.agentKey, use).then(
      (r) => r.status,
      () => 0,
    );
    await waitFor(() => emu.requests.some((r) => r.body.includes('orderUpdate')), 'the note to reach the vendor');
    gw.kill('SIGINT');
    await sleep(100);
    gw.kill('SIGINT');
    gw.kill('SIGTERM');
    const exit = await within(gw.waitExit(), 20_000, 'the gateway to exit');
    expect({ exit, status: await answer }).toEqual({ exit: { code: 0, signal: null }, status: 200 });
    const [row] = await rows<{ status: string }>(db, 'SELECT status FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2', [org.runId, use.id]);
    expect(row?.status).toBe('succeeded');
  }, 60_000);

  it('an open long-poll does not hold the shutdown: it is answered at once with the call as it stands', async () => {
    gw = await startGatewayProcess({ ...emulatorEnv(emu.url) });
    const org = await setupOrgVia(gw, { tools: ['shopify_refund.create'] });
    const waiting = await postToolUse(gw.http, org.runId, org.agentKey, toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' }));
    expect(waiting.status).toBe(202);
    await gw.logMetrics(); // a signal ends it below (stop() would find it dead): /metrics to the run log now, not during the drain
    const poll = gw.http.get(`/v1/tool-calls/${waiting.body.toolCallId as string}/result?waitMs=25000`).set(bearer(org.agentKey)).then((r) => r);
    await sleep(500); // the poll is waiting
    const t0 = Date.now();
    gw.kill('SIGTERM');
    const exit = await within(gw.waitExit(), 20_000, 'the gateway to exit');
    const answer = await poll;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(Date.now() - t0).toBeLessThan(5_000); // not the 25 s the poll asked for
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ status: 'waiting_approval' });
  }, 60_000);

  it('SHUTDOWN_DELAY_MS: after SIGTERM, /readyz answers 503 GATEWAY_STOPPING while calls are still served (out of rotation before the listener closes), then it drains and exits 0', async () => {
    // 5 s: room for the readiness check and the call under the other test worker's load (they took 660 ms beside CPU burners).
    gw = await startGatewayProcess({ ...emulatorEnv(emu.url), SHUTDOWN_DELAY_MS: '5000' });
    const org = await setupOrgVia(gw, { tools: ['order_lookup.lookup'] });
    expect((await gw.http.get('/readyz')).status).toBe(200);
    await gw.logMetrics(); // a signal ends it below (stop() would find it dead): /metrics to the run log now
    const t0 = Date.now();
    gw.kill('SIGTERM');
    await sleep(300);
    const ready = await gw.http.get('/readyz');
    expect([ready.status, ready.body.code]).toEqual([503, 'GATEWAY_STOPPING']);
    const call = await postToolUse(gw.http, org.runId, org.agentKey, toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect([call.status, call.body.status]).toEqual([200, 'succeeded']);
    expect(Date.now() - t0).toBeLessThan(5_000); // both within the delay
    const exit = await within(gw.waitExit(), 20_000, 'the gateway to exit');
    expect(exit).toEqual({ code: 0, signal: null });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(5_000);
    expect(gw.output()).toContain('/readyz answers 503, serving for 5000 ms more (SHUTDOWN_DELAY_MS)');
  }, 60_000);

  it('Ctrl-C in a terminal (SIGINT to the whole process group) with the embedded database: the call at the vendor is still recorded', async () => {
    // `npm start` with no DATABASE_URL: the gateway's embedded PostgreSQL must outlive the drain, not stop on the same Ctrl-C.
    const dataDir = join('.tmp', `data-ctrl-c-${process.pid}-${Date.now()}`);
    const env = { ...emulatorEnv(emu.url), DATABASE_URL: undefined, DATA_DIR: dataDir, VENDOR_TIMEOUT_MS: '10000' };
    try {
      gw = await startGatewayProcess(env, 90_000, { group: true });
      const org = await setupOrgVia(gw, { tools: ['order_lookup.lookup'] });
      await gw.logMetrics(); // a signal ends it below (stop() would find it dead): /metrics to the run log now, not during the drain
      emu.reset();
      emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 1_500, times: 1 });
      const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
      const inFlight = postToolUse(gw.http, org.runId, org.agentKey, use).then((r) => r);
      await waitFor(() => emu.count({ vendor: 'shopify' }) === 1, 'the lookup to be at the vendor');

      gw.killGroup('SIGINT');
      const exit = await within(gw.waitExit(), 30_000, 'the gateway to exit after Ctrl-C');
      const answer = await inFlight;
      expect(exit).toEqual({ code: 0, signal: null });
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      expect(answer.body).toMatchObject({ status: 'succeeded', replayed: false });

      // Started again on the same data: the row says what the client was told.
      gw = await startGatewayProcess(env, 90_000);
      const stored = await gw.http.get(`/v1/tool-calls/${answer.body.toolCallId as string}`).set(adminAuth);
      expect(stored.status).toBe(200);
      expect(stored.body).toMatchObject({ status: 'succeeded' });
      await gw.stop();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 240_000);
});
