import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { beginHttpDrain } from '../../src/app.setup.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { TEST_ADMIN_KEY } from '../support/secrets.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { sleep, waitFor } from './support.js';

/**
 * README "Stopping": requests admitted before the drain finish and are answered. Two requests pipelined on one
 * keep-alive connection both run before the drain begins: a slow lookup, then a write (an org created) that
 * finishes first, its answer waiting in order behind the lookup's. The drain used to mark every open answer
 * `Connection: close`, the first one's too: Node ended the connection after the first answer, and the write, which
 * ran, was never answered — a client that sends it again creates a second org.
 */
/** A new connection to the port: 'refused', or the status line of what GET /readyz on it was answered. */
function probe(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = '';
    socket.on('connect', () => socket.write('GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
    socket.on('data', (chunk: Buffer) => (data += chunk.toString()));
    socket.on('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED' ? 'refused' : `error ${String(e.code)}`));
    socket.on('close', () => resolve(data.split('\r\n')[0] || 'closed without an answer'));
  });
}

describe('the drain answers every pipelined request that ran before it began', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '5000' });
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a lookup at the vendor and an org created behind it: 200 then 201 on the connection, which the drain then closes; a new connection is refused', async () => {
    const port = (h.t.app.getHttpServer().address() as { port: number }).port;
    h.emu.reset();
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 1_500, times: 1 });

    const call = JSON.stringify(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    const name = `pipelined-${Date.now()}`;
    const orgBody = JSON.stringify({ name });
    const wire =
      `POST /v1/runs/${org.runId}/tool-calls HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${org.agentKey}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(call)}\r\n\r\n${call}` +
      `POST /v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_ADMIN_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(orgBody)}\r\n\r\n${orgBody}`;
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
    socket.on('error', () => undefined);
    const closed = new Promise<boolean>((resolve) => socket.once('close', () => resolve(true)));
    socket.write(wire);

    const orgsNamed = async (): Promise<number> => ((await h.t.ds.query('SELECT id FROM orgs WHERE name = $1', [name])) as unknown[]).length;
    await waitFor(() => h.emu.requests.length >= 1, 'the lookup to be at the vendor');
    await waitFor(async () => (await orgsNamed()) === 1, 'the pipelined org to be created');
    beginHttpDrain(h.t.app);
    const ended = await Promise.race([closed, sleep(8_000).then(() => false)]);
    socket.destroy();

    expect(await orgsNamed()).toBe(1);
    const statusLines = [...received.matchAll(/HTTP\/1\.1 \d{3} [A-Za-z ]+?\r\n/g)].map((m) => m[0].trim());
    expect(statusLines, received.slice(-1_500)).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 201 Created']);
    // Then the connection closes: its last answer's Connection: close, or (that answer ready before the drain began,
    // as here) the drain's deadline for a connection running nothing.
    expect(ended).toBe(true);
    // README "Stopping": from the drain on, the gateway no longer listens — a new connection is refused (a proxy
    // retries it elsewhere), not accepted and answered 503 until the shutdown hooks are through.
    expect(await probe(port)).toBe('refused');
  }, 60_000);
});

/**
 * The same, with the answers still on their way: a client reading slowly has 30 large answers (the OpenAPI document)
 * queued on its connection and an org created behind them when the drain begins. The drain's server.close() ran
 * Node's idle-connection sweep, which counts a connection idle once its request is read and its answer ended, bytes
 * still queued or not: the connection was cut a dozen answers in, and the org's 201 was never sent.
 */
describe('the drain lets answers still being sent to a slow reader finish', () => {
  let t: TestApp | undefined;
  afterAll(async () => {
    await t?.close();
  });

  it('30 large pipelined answers and a 201 behind them, none read when the drain begins: all 31 arrive whole', async () => {
    t = await startTestApp();
    const port = (t.app.getHttpServer().address() as { port: number }).port;
    const N = 30;
    const name = `flushing-${Date.now()}`;
    const orgBody = JSON.stringify({ name });
    const wire =
      `GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n`.repeat(N) +
      `POST /v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_ADMIN_KEY}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(orgBody)}\r\n\r\n${orgBody}`;
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.pause(); // reads nothing yet: the answers wait in the server's socket
    socket.write(wire);
    const orgs = async (): Promise<number> => ((await t!.ds.query('SELECT id FROM orgs WHERE name = $1', [name])) as unknown[]).length;
    await waitFor(async () => (await orgs()) === 1, 'the pipelined org to be created');
    await sleep(300);

    beginHttpDrain(t.app);
    await sleep(100);
    const chunks: Buffer[] = [];
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.resume();
    await Promise.race([closed, sleep(10_000)]);
    socket.destroy();
    const received = Buffer.concat(chunks).toString('latin1');
    // Whole answers, read by their Content-Length (a cut one is not counted).
    const statusLines: string[] = [];
    for (let at = 0; ; ) {
      const end = received.indexOf('\r\n\r\n', at);
      if (end < 0) break;
      const head = received.slice(at, end);
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
      if (end + 4 + length > received.length) break;
      statusLines.push(head.split('\r\n')[0]!);
      at = end + 4 + length;
    }
    expect(await orgs()).toBe(1);
    expect(statusLines.length, `received ${received.length} bytes`).toBe(N + 1);
    expect(statusLines.at(-1)).toBe('HTTP/1.1 201 Created');
  }, 60_000);
});
