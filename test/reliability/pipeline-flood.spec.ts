import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js';
import { logSocketAnswer } from '../support/response-log.js';
import { rssMb, sleep, waitFor } from './support.js';

/** Sends `requests` pipelined on one connection without reading; then reads what was answered until the gateway closes it. */
async function pipelined(port: number, request: string, count: number, readAfterMs: number): Promise<{ answers: number; closed: boolean }> {
  const sock = net.connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => sock.once('connect', resolve).once('error', reject));
  sock.on('error', () => undefined); // a reset is one of the answers under test
  let text = '';
  let closed = false;
  sock.pause();
  sock.setEncoding('latin1').on('data', (c: string) => (text += c));
  sock.on('close', () => (closed = true));
  sock.write(request.repeat(count));
  await sleep(readAfterMs);
  sock.resume();
  await waitFor(() => closed || text.split('HTTP/1.1 ').length - 1 === count || undefined, 'the answers or the close', 20_000);
  sock.destroy();
  logSocketAnswer(request, Buffer.from(text, 'latin1')); // the run-wide leak scan reads it
  return { answers: text.split('HTTP/1.1 ').length - 1, closed };
}

const DEPTH = 64;
const OPENAPI = 'GET /openapi.json HTTP/1.1\r\nHost: gateway\r\n\r\n';

/**
 * HTTP/1.1 pipelining by a client that does not read: Node starts every request of a chunk it has read, so
 * one write of small GETs would start about 1,400 requests and keep every answer in memory (hundreds of MB
 * for the OpenAPI document). A connection may have HTTP_PIPELINE_DEPTH (64) unanswered; past that it is closed.
 */
describe('pipelined requests (dist/src/main.js)', () => {
  let gw: GatewayProcess;
  let port: number;
  beforeAll(async () => {
    gw = await startGatewayProcess({ HTTP_PIPELINE_DEPTH: String(DEPTH) });
    port = Number(new URL(gw.url).port);
  }, 60_000);
  afterAll(async () => {
    await gw?.stop(2_000);
  });

  it('a flood of pipelined requests that are not read closes the connection: memory stays bounded, the gateway serves on', async () => {
    const before = rssMb(gw.pid);
    const { answers, closed } = await pipelined(port, OPENAPI, 2_000, 1_500);
    expect(closed).toBe(true);
    // At most the allowed depth was answered (those already written to the socket), never the 2,000.
    expect(answers).toBeLessThanOrEqual(DEPTH);
    // Unbounded, the 2,000 answers (~120 KB each) grew it by more than 200 MB.
    expect(rssMb(gw.pid) - before).toBeLessThan(100);
    const health = await gw.http.get('/healthz');
    expect(health.status).toBe(200);
  }, 60_000);

  it('pipelining within the depth is answered in full and in order', async () => {
    const depth = 10;
    const { answers, closed } = await pipelined(port, 'GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n', depth, 200);
    expect(answers).toBe(depth);
    expect(closed).toBe(false);
  }, 30_000);
});
