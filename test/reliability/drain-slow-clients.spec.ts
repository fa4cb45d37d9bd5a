import { readFileSync } from 'node:fs';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DRAIN_BACKSTOP_MARGIN_MS, DRAIN_CLIENT_DEADLINE_MS } from '../../src/common/http/http-drain.js';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { startGatewayProcess, setupOrgVia, within, type GatewayProcess } from '../support/gateway-process.js';
import { emulatorEnv, toolUse } from '../support/scenario.js';
import { openDb, postToolUse, rawClient, rows, sleep, waitFor, type RawClient } from './support.js';

/** Until the process has used no CPU for 300 ms (/proc/<pid>/stat utime + stime), at most 60 s. */
async function untilIdle(pid: number): Promise<void> {
  const cpuTicks = (): number => {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return Number(fields[11]) + Number(fields[12]);
  };
  let last = cpuTicks();
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; ) {
    await sleep(300);
    const now = cpuTicks();
    if (now === last) return;
    last = now;
  }
  throw new Error(`process ${pid} still busy after 60 s`);
}

/** The head of a tool-call POST whose body (`length` bytes) the caller sends itself. */
function toolCallHead(runId: string, agentKey: string, length: number): string {
  return (
    `POST /v1/runs/${runId}/tool-calls HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${agentKey}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`
  );
}

const VENDOR_TIMEOUT_MS = 2_000;

/**
 * README "Stopping": the drain lasts at most VENDOR_TIMEOUT_MS (plus a margin). Node's server.close() waits for
 * every connection that is not idle and stops enforcing headersTimeout/requestTimeout once closing, so a client
 * with half-sent headers, or one trickling a body, used to hold the stop until the SIGKILL; and a body completed
 * during the drain started its tool call then, late in the grace period.
 */
describe('drain with slow clients (dist/src/main.js)', () => {
  let emu: VendorEmulator;
  let db: pg.Pool;
  let gw: GatewayProcess | undefined;
  const clients: RawClient[] = [];
  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    db = openDb();
  });
  afterAll(async () => {
    for (const c of clients) c.sock.destroy();
    await gw?.stop(1_000);
    await db?.end();
    await emu?.stop();
  });

  it('half-sent headers and a trickling body do not hold the stop; a body completed during the drain is refused 503; the call in flight is recorded', async () => {
    gw = await startGatewayProcess({ ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: String(VENDOR_TIMEOUT_MS) });
    const org = await setupOrgVia(gw, { tools: ['order_lookup.lookup'] });
    await gw.logMetrics(); // a signal ends it below (stop() would find it dead): /metrics to the run log now, not during the drain
    const port = Number(new URL(gw.url).port);
    emu.reset();
    emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 1_500, times: 1 });

    // A call at the vendor when SIGTERM arrives: it must finish and be recorded.
    const inFlightUse = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const inFlight = postToolUse(gw.http, org.runId, org.agentKey, inFlightUse).then((r) => r);
    await waitFor(() => emu.requests.length >= 1, 'the lookup to be at the vendor');

    // Headers half sent: the request has begun, so Node's closeIdleConnections() leaves the connection open.
    const halfHeaders = await rawClient(port);
    clients.push(halfHeaders);
    halfHeaders.sock.write(`GET /healthz HTTP/1.1\r\nHost: gateway\r\n`);

    // A tool call whose body trickles in and never completes.
    const trickleBody = JSON.stringify(toolUse('order_lookup', { action: 'lookup', orderId: '777' }));
    const trickling = await rawClient(port);
    clients.push(trickling);
    trickling.sock.write(toolCallHead(org.runId, org.agentKey, trickleBody.length + 1_000) + trickleBody.slice(0, 1));
    const drip = setInterval(() => trickling.sock.writable && trickling.sock.write(' '), 300);

    // A tool call whose body is half sent at SIGTERM and completed during the drain: admitted to the middleware chain
    // before the drain, but not started: it must be refused, not sent to the vendor late.
    const lateUse = toolUse('order_lookup', { action: 'lookup', orderId: '888' });
    const lateBody = JSON.stringify(lateUse);
    const late = await rawClient(port);
    clients.push(late);
    late.sock.write(toolCallHead(org.runId, org.agentKey, lateBody.length) + lateBody.slice(0, 10));
    await sleep(300); // every request has reached the gateway

    const sigtermAt = performance.now();
    gw.kill('SIGTERM');
    await sleep(300);
    late.sock.write(lateBody.slice(10));

    // Without the fix the process never exits (the test harness's SIGKILL ends it); the bound is the backstop's plus slack.
    const bound = VENDOR_TIMEOUT_MS + DRAIN_BACKSTOP_MARGIN_MS + 3_000;
    const exit = await within(gw.waitExit(), bound, 'the gateway to exit while slow clients hold connections').finally(() => clearInterval(drip));
    const exitedAt = performance.now();
    expect(exit).toEqual({ code: 0, signal: null });

    // Not by the backstop: the half-sent headers are cut at once, the trickling body after the client deadline.
    await waitFor(() => halfHeaders.closedAt() && trickling.closedAt() && late.closedAt(), 'the raw connections to be closed', 2_000);
    expect(halfHeaders.closedAt()! - sigtermAt).toBeLessThan(1_000);
    // The deadline plus room for the other test worker's load (it came 5–8 ms after it here), still under the backstop (7 s).
    expect(trickling.closedAt()! - sigtermAt).toBeLessThan(DRAIN_CLIENT_DEADLINE_MS + 3_000);
    expect(exitedAt - sigtermAt).toBeLessThan(VENDOR_TIMEOUT_MS + DRAIN_BACKSTOP_MARGIN_MS);
    expect(halfHeaders.received()).toBe('');
    expect(trickling.received()).toBe('');

    // The late body was answered 503 GATEWAY_STOPPING and started nothing.
    const lateAnswer = late.received();
    expect(lateAnswer).toMatch(/^HTTP\/1\.1 503 /);
    expect(lateAnswer).toMatch(/\r\nconnection: close\r\n/i);
    expect(JSON.parse(lateAnswer.slice(lateAnswer.indexOf('\r\n\r\n') + 4))).toMatchObject({ status: 503, code: 'GATEWAY_STOPPING' });

    // The call in flight was answered and recorded; only it reached the vendor, only it has a row.
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ status: 'succeeded' });
    expect(emu.requests).toHaveLength(1);
    const recorded = await rows<{ tool_use_id: string; status: string }>(db, 'SELECT tool_use_id, status FROM tool_calls WHERE run_id = $1', [org.runId]);
    expect(recorded).toEqual([{ tool_use_id: inFlightUse.id, status: 'succeeded' }]);
  }, 60_000);

  it('a client that does not read its answers does not hold the stop: the backstop closes it after VENDOR_TIMEOUT_MS plus the margin', async () => {
    // Pipelined requests for the OpenAPI document, never read: the answers fill the socket buffers, and one stays
    // half written, an admitted request that never ends (the client deadline spares it: it is running). The
    // connection may have them all unanswered (past HTTP_PIPELINE_DEPTH it would be closed at once). 400 were too
    // few: all answered and buffered, none left running, the stop was at once. Writing 2,000 took the gateway up to
    // 25 s of a loaded machine before it was idle (untilIdle allows 60).
    const count = 2_000;
    gw = await startGatewayProcess({ VENDOR_TIMEOUT_MS: String(VENDOR_TIMEOUT_MS), HTTP_PIPELINE_DEPTH: String(count) });
    await gw.logMetrics(); // a signal ends it below (stop() would find it dead): /metrics to the run log now, not during the drain
    const port = Number(new URL(gw.url).port);
    const reader = await rawClient(port);
    clients.push(reader);
    reader.sock.pause();
    reader.sock.write('GET /openapi.json HTTP/1.1\r\nHost: gateway\r\n\r\n'.repeat(count));
    // The gateway has answered what the socket takes, and waits (on a busy machine that takes seconds: a signal sent
    // before would be handled only after it, and the stop measured from when it was sent).
    await untilIdle(gw.pid);

    const sigtermAt = performance.now();
    gw.kill('SIGTERM');
    const backstop = VENDOR_TIMEOUT_MS + DRAIN_BACKSTOP_MARGIN_MS;
    const exit = await within(gw.waitExit(), backstop + 5_000, 'the gateway to exit while a client does not read its answers');
    const exitedAt = performance.now();
    expect(exit).toEqual({ code: 0, signal: null });
    reader.sock.resume(); // reads what was buffered, then sees the connection closed
    await waitFor(() => reader.closedAt(), 'the unread connection to be closed', 5_000);
    // Held until the backstop (the client deadline did not cut a running answer), then no longer.
    expect(exitedAt - sigtermAt).toBeGreaterThan(backstop - 500);
  }, 120_000);
});
