import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { httpErrorOutcome, parseRetryAfterMs, vendorRequest, VendorHttpError, type VendorHttpRequest } from './vendor-http.js';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

const servers: http.Server[] = [];

async function serve(handler: Handler): Promise<string> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
});

function req(url: string, extra: Partial<VendorHttpRequest> = {}): VendorHttpRequest {
  return { method: 'GET', url, timeoutMs: 2_000, connectTimeoutMs: 1_000, maxResponseBytes: 1024 * 1024, ...extra };
}

async function failure(p: Promise<unknown>): Promise<VendorHttpError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(VendorHttpError);
  return err as VendorHttpError;
}

describe('vendorRequest', () => {
  it('sends the body and returns status, lower-cased headers and JSON', async () => {
    let seen = '';
    const url = await serve((rq, rs) => {
      const chunks: Buffer[] = [];
      rq.on('data', (c: Buffer) => chunks.push(c));
      rq.on('end', () => {
        seen = `${rq.method} ${rq.headers['content-length']} ${Buffer.concat(chunks).toString()}`;
        rs.writeHead(201, { 'Content-Type': 'application/json', 'X-Thing': 'a' });
        rs.end('{"ok":true}');
      });
    });
    const res = await vendorRequest(req(`${url}/x`, { method: 'POST', body: '{"a":1}', headers: { 'Content-Type': 'application/json' } }));
    expect(seen).toBe('POST 7 {"a":1}');
    expect(res.status).toBe(201);
    expect(res.headers['x-thing']).toBe('a');
    expect(res.json()).toEqual({ ok: true });
    expect(res.text()).toBe('{"ok":true}');
  });

  it('reports a refused connection as connect_error, not sent', async () => {
    const url = await serve(() => undefined);
    const server = servers.pop()!;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const err = await failure(vendorRequest(req(url)));
    expect(err.kind).toBe('connect_error');
    expect(err.requestSent).toBe(false);
    expect(httpErrorOutcome(err)).toMatchObject({ ok: false, kind: 'network', requestSent: false });
  });

  it('a socket whose connect fails at once (EMFILE: the gateway out of descriptors) is connect_error, not sent — never a "reset" after sending', async () => {
    const url = await serve(() => undefined);
    // What net does when no descriptor is left for the socket: the connect to an IP address, run on the next tick,
    // fails at once and destroys the socket, so by the time the request sees it it is neither connecting nor
    // connected, and the error (syscall "connect") follows.
    const connect = vi.spyOn(net.Socket.prototype, 'connect').mockImplementation(function (this: net.Socket) {
      (this as { connecting: boolean }).connecting = true;
      process.nextTick(() => {
        (this as { connecting: boolean }).connecting = false;
        this.destroy(Object.assign(new Error('connect EMFILE 127.0.0.1'), { code: 'EMFILE', errno: -24, syscall: 'connect' }));
      });
      return this;
    });
    try {
      const err = await failure(vendorRequest(req(url)));
      expect({ kind: err.kind, requestSent: err.requestSent }).toEqual({ kind: 'connect_error', requestSent: false });
      expect(httpErrorOutcome(err)).toMatchObject({ ok: false, kind: 'network', requestSent: false });
    } finally {
      connect.mockRestore();
    }
  });

  it('times out a silent vendor, marks the request sent and closes the socket', async () => {
    let closed = false;
    const url = await serve((rq) => rq.socket.on('close', () => (closed = true)));
    const started = Date.now();
    const err = await failure(vendorRequest(req(url, { timeoutMs: 150 })));
    expect(Date.now() - started).toBeLessThan(150 + 3_000); // the vendor never answers: a timeout that did not fire would hang
    expect(err.kind).toBe('timeout');
    expect(err.requestSent).toBe(true);
    // The close reaches the server a moment later; a loaded machine may take more than a few ms.
    for (let waited = 0; !closed && waited < 2_000; waited += 20) await new Promise((r) => setTimeout(r, 20));
    expect(closed).toBe(true);
    expect(httpErrorOutcome(err)).toMatchObject({ kind: 'timeout', requestSent: true });
  });

  it('reports a reset before any answer as sent', async () => {
    const url = await serve((rq) => rq.socket.destroy());
    const err = await failure(vendorRequest(req(url, { method: 'POST', body: 'x' })));
    expect(err.kind).toBe('reset');
    expect(err.requestSent).toBe(true);
  });

  it('reports a reset in the middle of the body', async () => {
    const url = await serve((_rq, rs) => {
      rs.writeHead(200, { 'content-length': '100' });
      rs.write('{"partial":');
      setTimeout(() => rs.socket?.destroy(), 20);
    });
    const err = await failure(vendorRequest(req(url)));
    expect(err.kind).toBe('reset');
    expect(err.requestSent).toBe(true);
  });

  it('refuses a declared oversize body', async () => {
    const url = await serve((_rq, rs) => {
      rs.writeHead(200, { 'content-length': '5000' });
      rs.end('x'.repeat(5000));
    });
    const err = await failure(vendorRequest(req(url, { maxResponseBytes: 1000 })));
    expect(err.kind).toBe('too_large');
    expect(err.status).toBe(200);
    expect(httpErrorOutcome(err)).toMatchObject({ kind: 'too_large', vendorStatus: 200, requestSent: true });
  });

  it('cuts a streamed body at the cap and stops reading', async () => {
    let closed = false;
    const url = await serve((rq, rs) => {
      rs.writeHead(200, { 'content-type': 'application/json' });
      rq.socket.on('close', () => (closed = true));
      const timer = setInterval(() => {
        if (!rs.destroyed) rs.write('x'.repeat(16 * 1024));
      }, 2);
      rs.on('close', () => clearInterval(timer));
    });
    const err = await failure(vendorRequest(req(url, { maxResponseBytes: 64 * 1024 })));
    expect(err.kind).toBe('too_large');
    await new Promise((r) => setTimeout(r, 50));
    expect(closed).toBe(true);
  });

  it('json() throws bad_json on a body that is not JSON', async () => {
    const url = await serve((_rq, rs) => rs.end('<html>oops</html>'));
    const res = await vendorRequest(req(url));
    expect(res.status).toBe(200);
    let err: unknown;
    try {
      res.json();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(VendorHttpError);
    expect((err as VendorHttpError).kind).toBe('bad_json');
    expect(httpErrorOutcome(err as VendorHttpError)).toMatchObject({ kind: 'bad_response', requestSent: true });
  });

  it('aborts on the signal', async () => {
    const url = await serve(() => undefined);
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 50);
    const err = await failure(vendorRequest(req(url, { signal: ac.signal })));
    expect(err.kind).toBe('aborted');
    expect(err.requestSent).toBe(true);
  });

  it('does not send when the signal is already aborted', async () => {
    let hits = 0;
    const url = await serve((_rq, rs) => {
      hits++;
      rs.end();
    });
    const ac = new AbortController();
    ac.abort();
    const err = await failure(vendorRequest(req(url, { signal: ac.signal })));
    expect(err.kind).toBe('aborted');
    expect(err.requestSent).toBe(false);
    expect(hits).toBe(0);
  });

  it('reuses keep-alive sockets', async () => {
    const ports = new Set<number>();
    const url = await serve((rq, rs) => {
      ports.add(rq.socket.remotePort ?? 0);
      rs.end('{}');
    });
    await vendorRequest(req(url));
    await vendorRequest(req(url));
    expect(ports.size).toBe(1);
  });

  it('retires an idle socket 1 s ahead of the server\'s Keep-Alive: timeout hint (a write on it would be "sent, answer lost")', async () => {
    const ports: number[] = [];
    const url = await serve((rq, rs) => {
      ports.push(rq.socket.remotePort ?? 0);
      rs.setHeader('Keep-Alive', 'timeout=2'); // the server closes idle connections after 2 s
      rs.end('{}');
    });
    await vendorRequest(req(url));
    await vendorRequest(req(url)); // at once: the same socket
    await new Promise((r) => setTimeout(r, 1_300)); // past the hint minus Node's 1 s margin
    await vendorRequest(req(url));
    expect(ports).toHaveLength(3);
    expect(ports[1]).toBe(ports[0]);
    expect(ports[2]).not.toBe(ports[0]);
  });

  it('counts a reset on a reused keep-alive socket as sent', async () => {
    let n = 0;
    const url = await serve((rq, rs) => {
      if (++n === 1) rs.end('{}');
      else rq.socket.destroy();
    });
    await vendorRequest(req(url));
    const err = await failure(vendorRequest(req(url, { method: 'POST', body: 'x' })));
    expect(n).toBe(2);
    expect(err).toMatchObject({ kind: 'reset', requestSent: true });
  });

  it('keeps header values out of error messages', async () => {
    const err = await failure(vendorRequest(req('http://127.0.0.1:1/', { headers: { 'x-token': 'bad\nvalue-secret' } })));
    expect(err.message).not.toContain('secret');
    expect(err.requestSent).toBe(false);
  });

  it('a request it cannot build (a header value Node refuses) is unsendable: never sent, a refusal, not a network failure', async () => {
    let hits = 0;
    const url = await serve((_rq, rs) => {
      hits++;
      rs.end('{}');
    });
    const err = await failure(vendorRequest(req(url, { headers: { Authorization: 'Bearer tok\r\nx-injected: 1' } })));
    expect(err).toMatchObject({ kind: 'unsendable', requestSent: false });
    expect(hits).toBe(0);
    // 'rejected', not 'network': the executor neither retries it nor counts it against the vendor's breaker.
    expect(httpErrorOutcome(err)).toEqual({ ok: false, kind: 'rejected', requestSent: false, message: 'vendor request could not be built (invalid header)' });
  });

  it('text() and json() drop one leading UTF-8 byte order mark, and only one', async () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    let payload = Buffer.concat([bom, Buffer.from('{"id":42}')]);
    const url = await serve((_rq, rs) => {
      rs.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8' });
      rs.end(payload);
    });
    const res = await vendorRequest(req(url));
    expect(res.json()).toEqual({ id: 42 });
    expect(res.text()).toBe('{"id":42}');
    expect(res.body.subarray(0, 3)).toEqual(bom); // the raw body is left as it came
    payload = Buffer.concat([bom, bom, Buffer.from('{"id":42}')]);
    const twice = await vendorRequest(req(url));
    expect(twice.text()).toBe('\ufeff{"id":42}');
    expect(() => twice.json()).toThrow(VendorHttpError);
  });
});

describe('parseRetryAfterMs', () => {
  it('reads seconds, fractional seconds and HTTP dates', () => {
    expect(parseRetryAfterMs('2')).toBe(2000);
    expect(parseRetryAfterMs('2.0')).toBe(2000);
    expect(parseRetryAfterMs(' 0.25 ')).toBe(250);
    const now = Date.parse('Wed, 21 Oct 2026 07:28:00 GMT');
    expect(parseRetryAfterMs('Wed, 21 Oct 2026 07:28:03 GMT', now)).toBe(3000);
    expect(parseRetryAfterMs('Wed, 21 Oct 2026 07:27:00 GMT', now)).toBe(0);
  });

  it('returns undefined for absent or invalid values', () => {
    expect(parseRetryAfterMs(undefined)).toBeUndefined();
    expect(parseRetryAfterMs('')).toBeUndefined();
    expect(parseRetryAfterMs('-1')).toBeUndefined();
    expect(parseRetryAfterMs('soon')).toBeUndefined();
    expect(parseRetryAfterMs('1e3')).toBeUndefined();
  });
});
