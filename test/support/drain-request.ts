import type { Server } from 'node:http';
import net from 'node:net';
import { logSocketAnswer } from './response-log.js';

/** What a raw request was answered: its status, its head (status line and headers), its body. */
export interface RawAnswer {
  status: number;
  head: string;
  body: string;
}

/**
 * A request that reaches the gateway during a drain: from its begin on the server no longer listens (a new
 * connection is refused), so this one's connection is opened and its headers sent before `drain` runs, and the
 * last byte of its body after — the request is dispatched by then, not yet started (README "Stopping": answered
 * 503 GATEWAY_STOPPING if its body arrives within 3 s). Resolves with the answer once the connection closes.
 */
export async function requestDuringDrain(
  server: Server,
  drain: () => void,
  req: { method: string; path: string; headers?: Record<string, string>; body: string },
): Promise<RawAnswer> {
  const { port } = server.address() as net.AddressInfo;
  const body = Buffer.from(req.body.length > 0 ? req.body : ' ');
  const headers = Object.entries({ Host: 'gateway', 'Content-Type': 'application/json', ...req.headers, 'Content-Length': String(body.length) })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  const dispatched = new Promise<void>((resolve) => server.once('request', () => resolve()));
  const socket = net.connect(port, '127.0.0.1');
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const head = `${req.method} ${req.path} HTTP/1.1\r\n${headers}\r\n`;
  socket.write(Buffer.concat([Buffer.from(head), body.subarray(0, -1)]));
  await dispatched;
  drain();
  socket.write(body.subarray(-1));
  await closed;
  logSocketAnswer(`${head}${body.toString()}`, received); // the run-wide leak scan reads it
  const split = received.indexOf('\r\n\r\n');
  const answerHead = split < 0 ? received : received.slice(0, split);
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(answerHead)?.[1] ?? 0), head: answerHead, body: split < 0 ? '' : received.slice(split + 4) };
}
