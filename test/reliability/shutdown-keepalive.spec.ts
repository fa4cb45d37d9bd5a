import http, { type Server } from 'node:http';
import net from 'node:net';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { beginHttpDrain } from '../../src/app.setup.js';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { startGatewayProcess, setupOrgVia, within, type GatewayProcess } from '../support/gateway-process.js';
import { requestDuringDrain } from '../support/drain-request.js';
import { logRawResponse } from '../support/response-log.js';
import { emulatorEnv, setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { openDb, rows, waitFor } from './support.js';

interface Answer {
  status: number;
  connection?: string;
  retryAfter?: string;
  contentType?: string;
  body: string;
}

/** Whether a new connection to the port is accepted ('connected') or refused ('ECONNREFUSED'; another error's code). */
function connectOutcome(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
  });
}

/** One request over `agent` (keep-alive: Node's fetch and every load balancer's upstream pool reuse sockets); 'ERR' when refused or reset. */
function send(url: string, agent: http.Agent, opts: { key?: string; body?: unknown } = {}): Promise<Answer | 'ERR'> {
  const data = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  const headers: Record<string, string | number> = {};
  if (opts.key) headers.Authorization = `Bearer ${opts.key}`;
  if (data !== undefined) Object.assign(headers, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) });
  return new Promise((resolve) => {
    const method = data === undefined ? 'GET' : 'POST';
    const req = http.request(url, { method, agent, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => {
        logRawResponse(method, url, res.statusCode ?? 0, res.headers, body, opts.body); // the run-wide leak scan reads it
        resolve({
          status: res.statusCode ?? 0,
          connection: res.headers.connection,
          retryAfter: res.headers['retry-after'],
          contentType: res.headers['content-type'],
          body,
        });
      });
    });
    req.on('error', () => resolve('ERR'));
    req.end(data);
  });
}

const stoppingAnswer = (a: Answer): boolean =>
  a.status === 503 &&
  a.connection === 'close' &&
  a.retryAfter === '1' &&
  (a.contentType ?? '').startsWith('application/problem+json') &&
  (JSON.parse(a.body) as { code?: string }).code === 'GATEWAY_STOPPING';

/**
 * SIGTERM while an agent runtime sends tool calls back to back over one keep-alive connection. Node's
 * server.close() only closes the connections idle at that instant: the busy one stayed open and was served
 * request after request (each a new vendor call) until the SIGKILL.
 */
describe('drain under a busy keep-alive connection (dist/src/main.js)', () => {
  let emu: VendorEmulator;
  let db: pg.Pool;
  let gw: GatewayProcess | undefined;
  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    db = openDb();
  });
  afterAll(async () => {
    await gw?.stop(1_000);
    await db?.end();
    await emu?.stop();
  });

  it('the call in flight finishes with Connection: close; nothing new starts (503 GATEWAY_STOPPING) and the process exits', async () => {
    gw = await startGatewayProcess({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '10000' });
    const org = await setupOrgVia(gw, { tools: ['order_lookup.lookup'] });
    await gw.logMetrics(); // a signal ends it below (stop() would find it dead): /metrics to the run log now, not during the drain
    emu.reset();
    emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 700, times: Infinity });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const url = `${gw.url}/v1/runs/${org.runId}/tool-calls`;
    let sigtermAt = 0;
    let exitedAt = 0;
    const exited = gw.waitExit().then((e) => {
      exitedAt = performance.now();
      return e;
    });
    let inFlightAtSigterm: Promise<Answer | 'ERR'> | undefined;
    const afterSigterm: Answer[] = [];
    let sent = 0;
    const loop = (async () => {
      const until = performance.now() + 14_000;
      while (performance.now() < until && exitedAt === 0) {
        const sentAt = performance.now();
        const answer = send(url, agent, { key: org.agentKey, body: toolUse('order_lookup', { action: 'lookup', orderId: '12345' }) });
        sent++;
        if (sigtermAt === 0) inFlightAtSigterm = answer;
        const r = await answer;
        if (r === 'ERR') break; // the listener is closed
        if (sigtermAt && sentAt > sigtermAt) afterSigterm.push(r);
      }
    })();
    await waitFor(() => sent >= 2 && emu.requests.length >= 2, 'a second call to be at the vendor on the kept-alive socket');
    const vendorRequestsAtSigterm = emu.requests.length;
    sigtermAt = performance.now();
    gw.kill('SIGTERM');
    const inFlight = await inFlightAtSigterm!;
    const exit = await within(exited, 5_000, 'the gateway to exit while its keep-alive client keeps sending');
    await loop;
    agent.destroy();

    expect(exit).toEqual({ code: 0, signal: null });
    expect(exitedAt - sigtermAt).toBeLessThan(5_000); // not the 14 s the client kept sending for
    // The call at the vendor at SIGTERM is answered, and the client told not to send on that socket again.
    expect(inFlight).toMatchObject({ status: 200, connection: 'close' });
    // Nothing sent after SIGTERM reached a vendor; whatever reached the gateway was told it is stopping.
    expect(emu.requests.length).toBe(vendorRequestsAtSigterm);
    expect(afterSigterm.filter((a) => !stoppingAnswer(a))).toEqual([]);
    const statuses = await rows<{ status: string }>(db, 'SELECT status FROM tool_calls WHERE run_id = $1', [org.runId]);
    expect(statuses.length).toBe(vendorRequestsAtSigterm);
    expect(statuses.filter((r) => r.status !== 'succeeded')).toEqual([]); // every call that started is recorded
  }, 60_000);
});

describe('beginHttpDrain (what main.ts runs before app.close())', () => {
  let h: Harness | undefined;
  afterAll(async () => {
    await h?.close();
  });

  it('stops listening (a new connection, readyz included, is refused), closes the idle kept-alive connection at once, answers a request whose body was still coming 503 GATEWAY_STOPPING; the request in flight completes with Connection: close', async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '5000' });
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const addr = h.t.app.getHttpServer().address() as { port: number };
    const base = `http://127.0.0.1:${addr.port}`;
    h.emu.reset();
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 1_000, times: 1 });
    const busy = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const idle = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect(await send(`${base}/readyz`, idle)).toMatchObject({ status: 200, connection: 'keep-alive' }); // a kept-alive socket, idle now
      const inFlight = send(`${base}/v1/runs/${org.runId}/tool-calls`, busy, { key: org.agentKey, body: toolUse('order_lookup', { action: 'lookup', orderId: '12345' }) });
      await waitFor(() => h!.emu.requests.length >= 1, 'the lookup to be at the vendor');

      let idleClosed = false;
      for (const sockets of Object.values(idle.freeSockets)) for (const s of sockets ?? []) s.once('close', () => (idleClosed = true));
      // A request whose connection was open and whose body was still coming when the drain began: refused, not run.
      const late = await requestDuringDrain(h.t.app.getHttpServer() as Server, () => beginHttpDrain(h!.t.app), {
        method: 'POST',
        path: `/v1/runs/${org.runId}/tool-calls`,
        headers: { Authorization: `Bearer ${org.agentKey}` },
        body: JSON.stringify(toolUse('order_lookup', { action: 'lookup', orderId: '12345' })),
      });
      expect(late.status, late.head).toBe(503);
      expect(late.head).toMatch(/\r\nConnection: close\r\n/i);
      expect(late.head).toMatch(/\r\nRetry-After: 1\r\n/i);
      expect(JSON.parse(late.body)).toMatchObject({ status: 503, code: 'GATEWAY_STOPPING', correlationId: expect.any(String) });
      await waitFor(() => idleClosed, 'the idle kept-alive connection to be closed (now, not after the 5 s keep-alive timeout)', 1_000);

      for (const path of ['/readyz', '/healthz', `/v1/runs/${org.runId}`]) {
        expect(await connectOutcome(addr.port), path).toBe('ECONNREFUSED');
      }
      const answer = await inFlight;
      expect(answer).toMatchObject({ status: 200, connection: 'close' });
      expect(JSON.parse((answer as Answer).body)).toMatchObject({ status: 'succeeded' });
      expect(h.emu.requests).toHaveLength(1);
    } finally {
      busy.destroy();
      idle.destroy();
    }
  }, 60_000);
});
