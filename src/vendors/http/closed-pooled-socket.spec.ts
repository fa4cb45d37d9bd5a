/**
 * vendor-http's shared agents use scheduling 'lifo'. Node's Agent.addRequest only
 * drops destroyed sockets from the FRONT of the free list (`while (freeSockets[0].destroyed) shift()`) and then, for
 * lifo, pops the END. A pooled socket the vendor closed (FIN: idle close, deploy, LB drain) is destroyed at once but
 * leaves the free list only on its 'close' event, later in the loop iteration. A vendor call started in between (a DB
 * answer read in the same poll phase, a setImmediate wake-up) is handed the dead socket: it fails ECONNRESET on a
 * "reused" socket, which vendorRequest reports as kind 'reset', requestSent: true — a write that never left becomes
 * OUTCOME_UNKNOWN (indeterminate, reconcile by hand), and the vendor's breaker is charged a network failure.
 * With fifo (Node's default) Node's own check covers that gap, but not a call started in the same tick as the FIN.
 * Now a request handed a closed pooled socket is sent again on another one (sendOnLiveSocket).
 */
import dc from 'node:diagnostics_channel';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { vendorRequest, VendorHttpError, type VendorHttpRequest } from './vendor-http.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function scenario(startCall: (go: () => void) => void, closeBoth = false): Promise<{ outcome: unknown; postsSeen: number }> {
  const clientSockets: Socket[] = [];
  const onClient = ({ socket }: { socket: Socket }): void => void clientSockets.push(socket);
  dc.subscribe('net.client.socket', onClient as (m: unknown) => void);
  let postsSeen = 0;
  const serverSockets: Socket[] = [];
  let warmB: Socket | undefined;
  const server = http.createServer((rq, rs) => {
    if (rq.url === '/warm-b') warmB = rq.socket;
    rq.resume();
    rq.on('end', () => {
      if (rq.method === 'POST') postsSeen++;
      // the two warm-up reads are answered 40 ms apart: the second socket is freed last (the end of the free list)
      const delay = rq.url === '/warm-a' ? 20 : rq.url === '/warm-b' ? 60 : 0;
      setTimeout(() => rs.end('{}'), delay);
    });
  });
  server.on('connection', (s) => serverSockets.push(s));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(async () => {
    dc.unsubscribe('net.client.socket', onClient as (m: unknown) => void);
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const spec = (path: string, extra: Partial<VendorHttpRequest> = {}): VendorHttpRequest => ({
    method: 'GET', url: `${url}${path}`, timeoutMs: 2_000, connectTimeoutMs: 1_000, maxResponseBytes: 1024, ...extra,
  });
  // Two pooled keep-alive sockets.
  await Promise.all([vendorRequest(spec('/warm-a')), vendorRequest(spec('/warm-b'))]);
  expect(serverSockets).toHaveLength(2);
  // The one freed last (warm-b's): the one lifo hands out next.
  const srvB = warmB!;
  const cliB = clientSockets.find((c) => c.localPort === srvB.remotePort)!;
  expect(cliB).toBeDefined();
  const outcome = new Promise<unknown>((resolve) => {
    cliB.once('end', () =>
      startCall(() => {
        vendorRequest(spec('/refund', { method: 'POST', body: '{"amount":1}', headers: { 'content-type': 'application/json' } })).then(
          (r) => resolve({ status: r.status }),
          (e: unknown) => resolve(e instanceof VendorHttpError ? { kind: e.kind, requestSent: e.requestSent } : e),
        );
      }),
    );
  });
  if (closeBoth) serverSockets.find((x) => x !== srvB)!.end();
  srvB.end(); // the vendor closes its idle keep-alive connection (idle timeout, deploy, load balancer drain)
  return { outcome: await outcome, postsSeen: await new Promise<number>((r) => setTimeout(() => r(postsSeen), 100)) };
}

describe('pooled socket closed by the vendor, call started in the same loop iteration (lifo)', () => {
  it('control: started on the next timer tick, the call gets a live socket and is sent', async () => {
    const { outcome, postsSeen } = await scenario((go) => setTimeout(go, 0));
    expect(outcome).toEqual({ status: 200 });
    expect(postsSeen).toBe(1);
  });

  it('started in the check phase (setImmediate) after the FIN: the POST is sent on another socket (was: failed "reset", counted as sent, and never seen)', async () => {
    const { outcome, postsSeen } = await scenario((go) => setImmediate(go));
    expect({ outcome, postsSeen }).toEqual({ outcome: { status: 200 }, postsSeen: 1 });
  });

  it('started in the same tick as the FIN is read: sent on another socket', async () => {
    const { outcome, postsSeen } = await scenario((go) => go());
    expect({ outcome, postsSeen }).toEqual({ outcome: { status: 200 }, postsSeen: 1 });
  });

  it('every pooled socket closed by the vendor at once: the POST goes out once, on a fresh connection', async () => {
    const { outcome, postsSeen } = await scenario((go) => setImmediate(go), true);
    expect({ outcome, postsSeen }).toEqual({ outcome: { status: 200 }, postsSeen: 1 });
  });
});
