import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { closeLingering, LINGER_BYTES, LINGER_MS } from './lingering-close.js';

describe('closeLingering: the close after an answer lets a client still sending read it', () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = undefined;
  });

  /** A server that answers at once and closes as Node's HTTP server does after Connection: close (destroySoon). */
  async function answering(): Promise<{ port: number; sockets: Socket[]; listeners: number[] }> {
    const sockets: Socket[] = [];
    const listeners: number[] = [];
    server = createServer({ allowHalfOpen: true }, (socket) => {
      sockets.push(socket);
      closeLingering(socket);
      socket.on('data', () => undefined);
      listeners.push(socket.listenerCount('end') + socket.listenerCount('finish'));
      socket.write('HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', () => socket.destroySoon());
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    return { port: (server!.address() as AddressInfo).port, sockets, listeners };
  }

  /**
   * Sends without pause until the connection closes; what it read, and whether it saw the server's FIN. `allowHalfOpen`:
   * a client that ignores the FIN, its side left open and still sending.
   */
  async function blast(port: number, allowHalfOpen: boolean, slow = false): Promise<{ answer: string; ended: boolean; ms: number }> {
    const s = connect({ port, host: '127.0.0.1', allowHalfOpen });
    let answer = '';
    let ended = false;
    let closed = false;
    s.on('data', (c: Buffer) => (answer += c.toString('latin1')));
    s.on('end', () => (ended = true));
    s.on('close', () => (closed = true));
    s.on('error', () => undefined);
    await new Promise<void>((r) => s.once('connect', () => r()));
    const started = Date.now();
    const chunk = Buffer.alloc(slow ? 1024 : 256 * 1024, 0x20);
    while (!closed && Date.now() - started < LINGER_MS + 3_000) {
      if ((allowHalfOpen || !ended) && !s.write(chunk)) await new Promise((r) => { s.once('drain', r); setTimeout(r, 20); });
      else await new Promise((r) => setTimeout(r, slow ? 20 : 1));
    }
    s.destroy();
    return { answer, ended, ms: Date.now() - started };
  }

  it('the answer is read and the connection ends (FIN) though the client was still sending; it closes once the client ends its side', async () => {
    const { port, sockets } = await answering();
    const r = await blast(port, false);
    expect(r.answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(r.ended).toBe(true);
    expect(r.ms).toBeLessThan(LINGER_MS);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(sockets[0]!.destroyed).toBe(true);
  });

  it('a client that ignores the FIN and goes on sending slowly is cut after LINGER_MS, nothing left listening', async () => {
    const { port, sockets, listeners } = await answering();
    const r = await blast(port, true, true);
    expect(r.answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(r.ms).toBeGreaterThanOrEqual(LINGER_MS - 200);
    expect(r.ms).toBeLessThan(LINGER_MS + 2_000);
    expect(sockets[0]!.destroyed).toBe(true);
    expect(sockets[0]!.listenerCount('end') + sockets[0]!.listenerCount('finish')).toBe(listeners[0]);
  });

  it(`a client that ignores the FIN and goes on sending fast is cut once it sent ${LINGER_BYTES / 1048576} MiB more, before LINGER_MS`, async () => {
    const { port, sockets } = await answering();
    const r = await blast(port, true);
    expect(r.answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(r.ms).toBeLessThan(LINGER_MS);
    expect(sockets[0]!.destroyed).toBe(true);
    expect(sockets[0]!.bytesRead).toBeGreaterThan(LINGER_BYTES);
  });
});
