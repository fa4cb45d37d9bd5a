import type { Server } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postApiKey } from '../support/api-keys.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

/**
 * Headers of an API that hands out unredacted vendor results and keys (hardening review): every answer says
 * `nosniff` (results hold text third parties wrote); the /docs page, where an operator pastes a key, may not be
 * framed and loads nothing from elsewhere; under /docs only the files the page loads are served (SwaggerModule
 * mounted the whole swagger-ui-dist folder: its package.json, source maps, a demo initializer), and the document is
 * at /openapi.json only (no /docs-yaml or /docs-json copy).
 */
describe('response hardening', () => {
  let h: Harness;
  let a: OrgSetup;
  let callId: string;
  beforeAll(async () => {
    h = await startHarness();
    a = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const res = await h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(bearer(a.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(res.status).toBe(200);
    callId = res.body.toolCallId as string;
  });
  afterAll(async () => {
    await h?.close();
  });

  it('every answer says nosniff: a full result, a minted key, an error, an export, a refusal before the routes, a raw one', async () => {
    const answers = {
      result: await h.t.http.get(`/v1/tool-calls/${callId}/result`).set(bearer(a.agentKey)),
      mintedKey: await postApiKey(h.t.http, adminAuth, { orgId: a.orgId, role: 'agent', name: 'nosniff probe' }, 'response-hardening.spec'),
      unknownRoute: await h.t.http.get('/v1/no-such-route').set(bearer(a.agentKey)),
      exportCsv: await h.t.http.get('/v1/tool-calls/export?format=csv').set(bearer(a.adminKey)),
      nulInUrl: await h.t.http.get('/v1/orgs/%00').set(adminAuth),
      metrics: await h.t.http.get('/metrics'),
    };
    expect(Object.fromEntries(Object.entries(answers).map(([k, r]) => [k, r.status]))).toEqual({
      result: 200, mintedKey: 201, unknownRoute: 404, exportCsv: 200, nulInUrl: 400, metrics: 200,
    });
    for (const [k, r] of Object.entries(answers)) expect([k, r.headers['x-content-type-options']]).toEqual([k, 'nosniff']);
    // Written on the socket before any ServerResponse exists (an Expect the server cannot meet): nosniff too.
    const port = ((h.t.app.getHttpServer() as Server).address() as { port: number }).port;
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\n\r\n'));
      let got = '';
      socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
      socket.on('close', () => resolve(got));
      socket.on('error', reject);
    });
    expect(raw.split('\r\n')[0]).toBe('HTTP/1.1 417 Expectation Failed');
    expect(raw.toLowerCase()).toContain('x-content-type-options: nosniff');
  });

  it('every /v1 answer says no-store, the refusals before the routes and those written on the socket included', async () => {
    const port = ((h.t.app.getHttpServer() as Server).address() as { port: number }).port;
    // The head of the answer to `text`, sent on a connection of its own (an answer before the body is read is whole).
    const rawHead = (text: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => socket.write(text));
        let got = '';
        socket.on('data', (d: Buffer) => {
          got += d.toString('latin1');
          if (got.includes('\r\n\r\n')) socket.destroy();
        });
        socket.on('close', () => resolve(got.split('\r\n\r\n')[0]));
        socket.on('error', reject);
      });
    const auth = `Authorization: Bearer ${a.adminKey}\r\n`;
    const heads = {
      transferCoding: await rawHead(`POST /v1/orgs HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n`),
      twoHosts: await rawHead(`GET /v1/tool-calls HTTP/1.1\r\nHost: x\r\nHost: y\r\n${auth}\r\n`),
      tooLargeToInvite: await rawHead(`POST /v1/orgs HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n`),
      expectation: await rawHead(`GET /v1/tool-calls HTTP/1.1\r\nHost: x\r\n${auth}Expect: something-else\r\n\r\n`),
      unparsable: await rawHead('GET /v1/tool-calls HTTP/1.1\r\nHost x\r\n\r\n'),
    };
    expect(Object.fromEntries(Object.entries(heads).map(([k, v]) => [k, v.split('\r\n')[0]]))).toEqual({
      transferCoding: 'HTTP/1.1 415 Unsupported Media Type',
      twoHosts: 'HTTP/1.1 400 Bad Request',
      tooLargeToInvite: 'HTTP/1.1 413 Payload Too Large',
      expectation: 'HTTP/1.1 417 Expectation Failed',
      unparsable: 'HTTP/1.1 400 Bad Request',
    });
    for (const [k, v] of Object.entries(heads)) expect([k, /\r\ncache-control: no-store(\r\n|$)/i.test(v)]).toEqual([k, true]);
  });

  it('a request that does not parse, pipelined after one that ran, is not answered with the earlier request\'s correlation id', async () => {
    const port = ((h.t.app.getHttpServer() as Server).address() as { port: number }).port;
    const body = JSON.stringify(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    const ran =
      `POST /v1/runs/${a.runId}/tool-calls HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.agentKey}\r\n` +
      `X-Correlation-Id: pipelined-first\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const unparsable = 'GET /v1/tool-calls HTTP/1.1\r\nHost x\r\n\r\n';
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(ran + unparsable));
      let got = '';
      socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
      socket.on('close', () => resolve(got));
      socket.on('error', reject);
    });
    // The 400 follows the call's answer directly, on the line its body ends (a JSON body has no line break at its end).
    const ids = [...raw.matchAll(/HTTP\/1\.1 (\d+)[^]*?\r\nx-correlation-id: ([^\r\n]*)/gi)].map((m) => [m[1], m[2]]);
    // The first ran and is answered first (RFC 9112 §9.3.2); the 400 is not its answer (before: it carried pipelined-first,
    // which the ledger has as the call that succeeded).
    expect(ids.map(([status]) => status)).toEqual(['200', '400']);
    const refused = ids.find(([status]) => status === '400');
    expect(refused?.[1]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(ids.filter(([, id]) => id === 'pipelined-first').map(([status]) => status)).not.toContain('400');
  });

  it('/docs may not be framed and loads nothing from elsewhere; what it loads is served', async () => {
    const page = await h.t.http.get('/docs');
    expect([page.status, page.headers['content-type']]).toEqual([200, expect.stringMatching(/^text\/html/)]);
    expect(page.headers['x-frame-options']).toBe('DENY');
    expect(page.headers['content-security-policy']).toMatch(/frame-ancestors 'none'/);
    expect(page.headers['content-security-policy']).toMatch(/script-src 'self';/);
    const loaded = [...String(page.text).matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!).filter((u) => !u.startsWith('#') && !u.startsWith('http'));
    expect(loaded.length).toBeGreaterThanOrEqual(5);
    for (const u of loaded) {
      const path = new URL(u, 'http://gateway/docs').pathname; // as a browser on /docs resolves it
      expect([path, (await h.t.http.get(path)).status]).toEqual([path, 200]);
    }
    expect((await h.t.http.get('/openapi.json')).status).toBe(200);
  });

  it('nothing else under /docs, and no second copy of the document', async () => {
    for (const path of ['/docs/swagger-initializer.js', '/docs/package.json', '/docs/swagger-ui.js.map', '/docs/swagger-ui-bundle.js.map', '/docs/index.js', '/docs/README.md', '/docs-yaml', '/docs-json']) {
      const res = await h.t.http.get(path);
      expect([path, res.status, res.headers['content-type']]).toEqual([path, 404, expect.stringMatching(/^application\/problem\+json/)]);
    }
  });

  // Found by a reviewer of routing edges: serve-static's 416 and 412 reached the problem filter as errors no code named.
  it('/docs files are sent whole: a Range or a failed precondition is no 500 (nor an error-level log line); a revalidation still gets 304', async () => {
    const before = h.t.logs.length;
    for (const headers of [{ Range: 'bytes=99999999-' }, { Range: 'bytes=0-9' }, { 'If-Match': '"nope"' }, { 'If-Unmodified-Since': 'Mon, 01 Jan 1990 00:00:00 GMT' }]) {
      const res = await h.t.http.get('/docs/swagger-ui.css').set(headers);
      expect([JSON.stringify(headers), res.status, res.headers['content-type']]).toEqual([JSON.stringify(headers), 200, expect.stringMatching(/^text\/css/)]);
    }
    const first = await h.t.http.get('/docs/swagger-ui.css');
    expect((await h.t.http.get('/docs/swagger-ui.css').set('If-None-Match', String(first.headers.etag))).status).toBe(304);
    expect(h.t.logs.slice(before).filter((l) => l.includes('unhandled error'))).toEqual([]);
  });
});
