import type { Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, startTestApp, type TestApp } from '../support/test-app.js';

/** Writes `parts` on one connection, `gapMs` apart; everything the server sent until it closed (or 3 s). */
function raw(port: number, parts: string[], gapMs = 0): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      s.destroy();
      resolve(Buffer.concat(chunks).toString('utf8'));
    }, 3_000);
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', () => undefined);
    s.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
    void (async () => {
      for (const p of parts) {
        if (!s.writable) return;
        s.write(p);
        await new Promise((r) => setTimeout(r, gapMs));
      }
    })();
  });
}

const statusLines = (text: string): string[] => text.match(/HTTP\/1\.[01] \d{3}/g) ?? [];

/**
 * A refusal that closes its connection (Connection: close: a 413, a bad Host, a body sent without a key) is the last
 * answer on it. A request the client pipelined behind it was still parsed and run, and its answer never sent (session
 * diff review): the client, seeing the connection close, sends it again, and a write runs twice (a second org, an API
 * key whose secret nobody saw). Such a request is now not run, so the close tells the truth: unanswered, not done. The
 * requests before the refusal run and are answered first, as ever.
 */
describe('requests pipelined behind a refusal that closes the connection', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await startTestApp();
    port = (t.app.getHttpServer().address() as AddressInfo).port;
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  const orgsNamed = async (name: string): Promise<number> =>
    ((await t.ds.query('SELECT count(*)::int AS n FROM orgs WHERE name = $1', [name])) as { n: number }[])[0].n;
  const createOrg = (name: string): string => {
    const body = JSON.stringify({ name });
    return `POST /v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: ${adminAuth.Authorization}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  };

  it('behind a 400 for an invalid Host value: only the 400 is answered, and the org is not created', async () => {
    const name = `after-host-${Date.now()}`;
    const text = await raw(port, [`GET /v1/orgs HTTP/1.1\r\nHost: x/y\r\nAuthorization: ${adminAuth.Authorization}\r\n\r\n` + createOrg(name)]);
    await new Promise((r) => setTimeout(r, 300));
    expect(statusLines(text)).toEqual(['HTTP/1.1 400']);
    expect(await orgsNamed(name)).toBe(0);
  });

  it('behind a 413 (its whole body sent, then the next request): only the 413, and the org is not created', async () => {
    const name = `after-413-${Date.now()}`;
    const big = 70_000; // over the 64 KiB limit of a body that is not a tool call
    const head = `POST /v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: ${adminAuth.Authorization}\r\nContent-Type: application/json\r\nContent-Length: ${big}\r\n\r\n`;
    const text = await raw(port, [head, ' '.repeat(big), createOrg(name)]);
    await new Promise((r) => setTimeout(r, 300));
    expect(statusLines(text)).toEqual(['HTTP/1.1 413']);
    expect(await orgsNamed(name)).toBe(0);
  });

  it('behind a body sent without a key (401, the connection closed): only the 401, and the org is not created', async () => {
    const name = `after-401-${Date.now()}`;
    const text = await raw(port, [`POST /v1/orgs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}` + createOrg(name)]);
    await new Promise((r) => setTimeout(r, 300));
    expect(statusLines(text)).toEqual(['HTTP/1.1 401']);
    expect(await orgsNamed(name)).toBe(0);
  });

  it('behind a 417 (an Expect other than 100-continue, answered outside Express): only the 417, no org', async () => {
    const name = `after-417-${Date.now()}`;
    const text = await raw(port, [`GET /v1/orgs HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\nAuthorization: ${adminAuth.Authorization}\r\n\r\n` + createOrg(name)]);
    await new Promise((r) => setTimeout(r, 300));
    expect(statusLines(text)).toEqual(['HTTP/1.1 417']);
    expect(await orgsNamed(name)).toBe(0);
  });

  it('behind the 413 to an oversized Expect: 100-continue upload sent without waiting: only the 413, no org', async () => {
    const name = `after-100-413-${Date.now()}`;
    const big = 70_000;
    const refused = `POST /v1/orgs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nAuthorization: ${adminAuth.Authorization}\r\nContent-Type: application/json\r\nContent-Length: ${big}\r\n\r\n${' '.repeat(big)}`;
    const text = await raw(port, [refused + createOrg(name)]);
    await new Promise((r) => setTimeout(r, 300));
    expect(statusLines(text)).toEqual(['HTTP/1.1 413']);
    expect(await orgsNamed(name)).toBe(0);
  });

  // A request pipelined BEFORE the refusal, its body still being read when the refusal marked the connection, was
  // dropped too (second diff review): never answered, the refusal queued behind it, the connection held for good.
  it('a request before a 401 to a body without a key is run and answered, then the 401, then the close', async () => {
    const name = `before-401-${Date.now()}`;
    const text = await raw(port, [createOrg(name) + 'POST /v1/orgs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}']);
    expect(statusLines(text)).toEqual(['HTTP/1.1 201', 'HTTP/1.1 401']);
    expect(await orgsNamed(name)).toBe(1);
  });

  it('a request before a 413 (declared Content-Length over the limit) is run and answered, then the 413', async () => {
    const name = `before-413-${Date.now()}`;
    const over = `POST /v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: ${adminAuth.Authorization}\r\nContent-Type: application/json\r\nContent-Length: 70000\r\n\r\n`;
    const text = await raw(port, [createOrg(name) + over]);
    expect(statusLines(text)).toEqual(['HTTP/1.1 201', 'HTTP/1.1 413']);
    expect(await orgsNamed(name)).toBe(1);
  });

  it('no connection is left open once its client has gone, whatever was pipelined (a made-up key included)', async () => {
    const server = t.app.getHttpServer() as Server;
    const connections = (): Promise<number> => new Promise((r) => server.getConnections((_e, c) => r(c)));
    server.closeAllConnections(); // what the earlier tests left idle
    await new Promise((r) => setTimeout(r, 200));
    const madeUp = 'POST /v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer made-up\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';
    const keyless = 'POST /v1/orgs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}';
    for (let i = 0; i < 10; i++) {
      const s = connect(port, '127.0.0.1');
      s.on('error', () => undefined);
      s.write((i % 2 ? madeUp : createOrg(`left-${Date.now()}-${i}`)) + keyless);
      setTimeout(() => s.destroy(), 500);
    }
    await new Promise((r) => setTimeout(r, 3_500));
    expect(await connections()).toBe(0);
  });

  it('a connection whose answers keep it open still answers every pipelined request in order', async () => {
    const a = `kept-a-${Date.now()}`;
    const b = `kept-b-${Date.now()}`;
    const text = await raw(port, [createOrg(a) + createOrg(b) + 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']);
    expect(statusLines(text)).toEqual(['HTTP/1.1 201', 'HTTP/1.1 201', 'HTTP/1.1 200']);
    expect([await orgsNamed(a), await orgsNamed(b)]).toEqual([1, 1]);
  });
});
