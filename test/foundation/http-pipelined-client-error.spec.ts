/**
 * RFC 9112 §9.3.2: a server answers pipelined requests in the order they came. A request Node's parser refuses (a bad
 * header line: 400; headers too large: 431; the bytes left over by a Content-Length shorter than its body) is answered
 * by handleClientError (bootstrap.ts) only once the answers to the requests before it on that connection have
 * finished: a client pairs answers with its requests by their order, and a 400 written at once, while the tool call
 * before it still ran, was read as the call's answer though the call ran at the vendor. Nothing is written in the
 * middle of an answer, and nothing is left listening on the socket.
 */
import { connect, type AddressInfo } from 'node:net';
import { EventEmitter } from 'node:events';
import { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { handleClientError } from '../../src/bootstrap.js';
import { logSocketAnswer } from '../support/response-log.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';

/** Writes bytes, collects everything the server sends until it closes the connection (or 8 s). */
function raw(port: number, bytes: string): Promise<{ wire: string; closed: boolean }> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const done = (closed: boolean) => {
      clearTimeout(timer);
      logSocketAnswer(bytes, Buffer.concat(chunks)); // the run-wide leak scan reads it
      resolve({ wire: Buffer.concat(chunks).toString('utf8'), closed });
    };
    const timer = setTimeout(() => {
      s.destroy();
      done(false);
    }, 8_000);
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', () => undefined);
    s.on('close', () => done(true));
    s.write(bytes);
  });
}

/** The status of each answer on the wire, in order. */
const statuses = (wire: string): number[] => [...wire.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

describe('pipelined requests: a request the parser refuses is answered after the answers before it', () => {
  let h: Harness;
  let org: OrgSetup;
  let port: number;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: ['shopify'] });
    port = (h.t.app.getHttpServer().address() as AddressInfo).port;
  }, 90_000);
  afterAll(async () => {
    await h?.close();
  });

  /** A tool call; `leftOver` is sent after its body, not counted in its Content-Length (a length shorter than what follows). */
  const toolCall = (id: string, leftOver = '') => {
    const body = JSON.stringify(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }, id));
    return (
      `POST /v1/runs/${org.runId}/tool-calls HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${org.agentKey}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}${leftOver}`
    );
  };
  const statusOf = async (id: string) =>
    ((await h.t.ds.query('SELECT status FROM tool_calls WHERE run_id = $1 AND tool_use_id = $2', [org.runId, id])) as { status: string }[])[0]?.status;

  const refused: { name: string; after: string; status: number }[] = [
    { name: 'a bad header line (400)', after: 'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n', status: 400 },
    { name: 'headers too large (431)', after: `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, status: 431 },
  ];
  for (const c of refused) {
    it(`a tool call, then a request with ${c.name}: the call's own answer first, then the refusal, then the connection closes`, async () => {
      const id = `toolu_pipe_${c.status}_${Date.now()}`;
      const { wire, closed } = await raw(port, toolCall(id) + c.after);
      expect(await statusOf(id)).toBe('succeeded');
      expect(statuses(wire), wire.slice(0, 400)).toEqual([200, c.status]);
      const refusal = wire.slice(wire.lastIndexOf('HTTP/1.1 '));
      expect(refusal).toMatch(/content-type: application\/problem\+json/i);
      expect(refusal).toMatch(/connection: close/i);
      expect(closed).toBe(true);
    }, 30_000);
  }

  it('a tool call whose Content-Length is shorter than the bytes sent: its answer, then the 400 for the bytes left over', async () => {
    const id = `toolu_pipe_short_${Date.now()}`;
    const { wire, closed } = await raw(port, toolCall(id, '\r\n{"more":"of the body"}'));
    expect(await statusOf(id)).toBe('succeeded');
    expect(statuses(wire), wire.slice(0, 400)).toEqual([200, 400]);
    expect(closed).toBe(true);
  }, 30_000);

  it('two requests answered in turn before the refusal: a tool call and a GET, then the 400', async () => {
    const id = `toolu_pipe_two_${Date.now()}`;
    const { wire, closed } = await raw(port, toolCall(id) + 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n' + 'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n');
    expect(await statusOf(id)).toBe('succeeded');
    expect(statuses(wire), wire.slice(0, 600)).toEqual([200, 200, 400]);
    expect(closed).toBe(true);
  }, 30_000);

  it('the connection still serves a refused request alone at once (nothing before it): 400 problem+json', async () => {
    const { wire, closed } = await raw(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n');
    expect(statuses(wire)).toEqual([400]);
    expect(closed).toBe(true);
  });
});

describe('handleClientError with answers still outstanding on the socket', () => {
  /** A ServerResponse as far as handleClientError looks: its request, whether its head is out, 'finish'. */
  class FakeResponse extends EventEmitter {
    headersSent = true;
    constructor(readonly req: { complete: boolean; headers: Record<string, string> }) {
      super();
    }
  }
  const err = (code: string) => Object.assign(new Error(code), { code });
  const socketWith = (res?: FakeResponse) => {
    const s = new Duplex({ read() {}, write(_c, _e, cb) { cb(); } }) as Duplex & { _httpMessage?: FakeResponse | null };
    s._httpMessage = res ?? null;
    const end = vi.spyOn(s, 'end');
    const write = vi.spyOn(s, 'write');
    const destroy = vi.spyOn(s, 'destroy');
    return { s, end, write, destroy };
  };
  /** What Node's resOnFinish does (the first 'finish' listener): the socket goes to the next answer, or to none. */
  const finish = (s: { _httpMessage?: FakeResponse | null }, res: FakeResponse, next: FakeResponse | null = null) => {
    s._httpMessage = next;
    res.emit('finish');
  };

  it('waits for the running answer, then the one queued behind it, and only then writes the refusal and closes', () => {
    const first = new FakeResponse({ complete: true, headers: {} });
    const second = new FakeResponse({ complete: true, headers: {} });
    second.headersSent = false;
    const f = socketWith(first);
    const record = vi.fn();
    handleClientError(err('HPE_INVALID_HEADER_TOKEN'), f.s, record);
    expect(f.end).not.toHaveBeenCalled();
    expect(f.destroy).not.toHaveBeenCalled();
    finish(f.s, first, second);
    expect(f.end).not.toHaveBeenCalled();
    finish(f.s, second);
    expect(f.end).toHaveBeenCalledTimes(1);
    expect(String(f.end.mock.calls[0]![0])).toMatch(/^HTTP\/1\.1 400 [^]*Connection: close\r\n/);
    expect(f.destroy).not.toHaveBeenCalled();
    expect(record).toHaveBeenCalledWith(expect.objectContaining({ status: 400, socket: f.s }));
    // nothing left listening
    for (const res of [first, second]) expect(res.listenerCount('finish') + res.listenerCount('close')).toBe(0);
    expect(f.s.listenerCount('close')).toBe(0);
  });

  it('repeated errors while waiting (Node reports its parser error again for each chunk, and at the FIN): one answer, no listener piled up', () => {
    const first = new FakeResponse({ complete: true, headers: {} });
    const f = socketWith(first);
    const record = vi.fn();
    const warn = vi.fn();
    process.on('warning', warn);
    try {
      for (let i = 0; i < 50; i++) handleClientError(err(i % 2 ? 'HPE_INVALID_METHOD' : 'ERR_HTTP_REQUEST_TIMEOUT'), f.s, record);
      expect(first.listenerCount('finish')).toBe(1);
      expect(f.s.listenerCount('close')).toBe(1);
      finish(f.s, first);
      expect(f.end).toHaveBeenCalledTimes(1);
      expect(record).toHaveBeenCalledTimes(1);
      handleClientError(err('HPE_INVALID_METHOD'), f.s, record);
      expect(f.end).toHaveBeenCalledTimes(1);
      expect(f.s.listenerCount('close')).toBe(0);
    } finally {
      process.off('warning', warn);
    }
    expect(warn).not.toHaveBeenCalled();
  });

  it('the socket closes while it waits: nothing written, nothing recorded, no listener left', () => {
    const first = new FakeResponse({ complete: true, headers: {} });
    const f = socketWith(first);
    const record = vi.fn();
    handleClientError(err('HPE_HEADER_OVERFLOW'), f.s, record);
    f.s.destroy();
    return new Promise<void>((resolve) => {
      f.s.once('close', () => {
        setImmediate(() => {
          expect(f.end).not.toHaveBeenCalled();
          expect(f.write).not.toHaveBeenCalled();
          expect(record).not.toHaveBeenCalled();
          expect(first.listenerCount('finish') + first.listenerCount('close')).toBe(0);
          resolve();
        });
      });
    });
  });

  it('the answer before it closes the connection (Connection: close): nothing written after it, nothing cut', () => {
    const first = new FakeResponse({ complete: true, headers: {} });
    const f = socketWith(first);
    handleClientError(err('HPE_INVALID_HEADER_TOKEN'), f.s);
    f.end.mockClear();
    // Node's resOnFinish ends the socket after an answer with Connection: close.
    f.s._httpMessage = null;
    f.s.end();
    f.end.mockClear();
    first.emit('finish');
    expect(f.end).not.toHaveBeenCalled();
    expect(f.write).not.toHaveBeenCalled();
    expect(f.destroy).not.toHaveBeenCalled();
  });

  it("a 408 to the in-flight request's own body is still answered at once, with that request's answer not begun", () => {
    const own = new FakeResponse({ complete: false, headers: {} });
    own.headersSent = false;
    const f = socketWith(own);
    handleClientError(err('ERR_HTTP_REQUEST_TIMEOUT'), f.s);
    expect(f.end).toHaveBeenCalledTimes(1);
    expect(String(f.end.mock.calls[0]![0])).toMatch(/^HTTP\/1\.1 408 /);
    expect(own.listenerCount('finish')).toBe(0);
  });
});
