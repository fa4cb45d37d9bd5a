import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js';
import { setupOrg, toolUse, type OrgSetup } from '../support/scenario.js';
import { bearer, startTestApp, type TestApp } from '../support/test-app.js';

/** Everything answered on a fresh connection to `data`, within `ms`. */
function exchange(port: number, data: string, ms = 1_500): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.write(data));
    let d = '';
    s.on('data', (c: Buffer) => (d += c.toString('latin1')));
    s.on('error', reject);
    const timer = setTimeout(() => s.destroy(), ms);
    s.on('close', () => {
      clearTimeout(timer);
      resolve(d);
    });
  });
}
const statusLines = (answer: string): string[] => answer.match(/HTTP\/1\.1 \d{3}/g) ?? [];

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** One HTTP/1.1 request with `target` as written on the request line (Connection: close). */
async function raw(port: number, method: string, target: string, headers: Record<string, string> = {}, body?: string): Promise<RawAnswer> {
  const all: Record<string, string> = { Host: 'gw.local', Connection: 'close', ...headers };
  if (body !== undefined) Object.assign(all, { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) });
  const head = Object.entries(all).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  const answer = await exchange(port, `${method} ${target} HTTP/1.1\r\n${head}\r\n${body ?? ''}`, 5_000);
  const [top, ...rest] = answer.split('\r\n\r\n');
  const lines = top.split('\r\n');
  const headersOut: Record<string, string> = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i > 0) headersOut[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
  }
  return { status: Number(lines[0].split(' ')[1]), headers: headersOut, body: rest.join('\r\n\r\n') };
}

/**
 * Found by a review of request-target forms. An absolute-form target (`GET http://host/v1/…`, which a server must
 * accept: RFC 9112 §3.2.2) was read by the router with Node's legacy url.parse and by everything else another way:
 * - an authority url.parse refuses (`xn--a`: no valid punycode) made the router skip every middleware: a text/html 404
 *   with no correlation id or log line, no Host check, and no HTTP/1.0 framing guard (a request pipelined behind one
 *   with a transfer coding was run);
 * - user-info (`http://user:password@host/…`, RFC 9110 §4.2.4: treat as an error) was served;
 * - a host url.parse ends early was routed as a path (`gw.local'x` → `/%27x/v1/runs/<id>`, 404) while the request log
 *   named the path after it, an existing run logged as not found;
 * - a port that is not digits made Node print the whole target on stderr (DEP0170), user-info and query included.
 * The target is now made origin-form first (toOriginForm), and one the gateway does not take is 400 problem+json.
 */
describe('absolute-form request targets', () => {
  let t: TestApp;
  let org: OrgSetup;
  let port: number;
  beforeAll(async () => {
    t = await startTestApp();
    org = await setupOrg(t, { tools: ['order_lookup.lookup'], vendors: [] });
    port = ((t.app.getHttpServer() as Server).address() as AddressInfo).port;
  });
  afterAll(async () => {
    await t?.close();
  });
  /** The "request completed" line of an answer, parsed. */
  const logLineOf = (correlationId: string | undefined) =>
    t.logs.filter((l) => correlationId && l.includes(correlationId)).map((l) => JSON.parse(l) as { msg?: string; req?: { path?: string } }).find((l) => l.msg === 'request completed');

  it.each([`http://gw.local/v1/runs/:run`, `HTTPS://GW.LOCAL:8443/v1/runs/:run`, "http://gw.local'x/v1/runs/:run", 'http://gw.local%41/v1/runs/:run', 'http://xn--a/v1/runs/:run'])(
    '%s is served as the run it names, and logged with that path',
    async (target) => {
      const r = await raw(port, 'GET', target.replace(':run', org.runId), bearer(org.agentKey));
      expect(r.status, r.body.slice(0, 200)).toBe(200);
      expect(JSON.parse(r.body)).toMatchObject({ id: org.runId });
      expect(logLineOf(r.headers['x-correlation-id'])?.req?.path).toBe(`/v1/runs/${org.runId}`);
    },
  );

  it.each([
    ['user-info', 'http://agent:hunter2@gw.local', 'user information'],
    ['user-info, https', 'https://u@gw.local', 'user information'],
    ['a port that is not digits', 'http://gw.local:abc', 'host[:port]'],
    ['an authority url.parse refuses', 'http://a[b', 'host[:port]'],
    ['no host', 'http://:80', 'host[:port]'],
    ['a host name longer than DNS allows', `http://${'a'.repeat(300)}.example`, 'host[:port]'],
    ['another scheme', 'ftp://gw.local', 'http or https'],
  ])('%s: 400 problem+json with a correlation id, logged, nothing run', async (_, authority, said) => {
    const before = (await t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1', [org.runId])) as [{ n: number }];
    const use = JSON.stringify(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }));
    const r = await raw(port, 'POST', `${authority}/v1/runs/${org.runId}/tool-calls`, bearer(org.agentKey), use);
    expect(r.status, r.body.slice(0, 200)).toBe(400);
    expect(r.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(r.body)).toMatchObject({ code: 'BAD_REQUEST', detail: expect.stringContaining(said) as string });
    expect(r.body).not.toContain('hunter2');
    expect(logLineOf(r.headers['x-correlation-id'])?.req?.path).toBe(`/v1/runs/${org.runId}/tool-calls`);
    const after = (await t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1', [org.runId])) as [{ n: number }];
    expect(after[0].n).toBe(before[0].n);
  });

  it('with Expect: 100-continue, a refused target is answered 400 before the body is invited (no 100 Continue)', async () => {
    const answer = await exchange(port, 'POST http://u:pw@gw.local/v1/orgs HTTP/1.1\r\nHost: gw.local\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n');
    expect(answer).not.toContain('100 Continue');
    expect(statusLines(answer)).toEqual(['HTTP/1.1 400']);
    expect(answer).not.toContain('pw@');
  });

  it('an HTTP/1.1 request without Host is refused 400, whatever the form of its target', async () => {
    expect(statusLines(await exchange(port, 'GET /v1/tools HTTP/1.1\r\nConnection: close\r\n\r\n'))).toEqual(['HTTP/1.1 400']);
    expect(statusLines(await exchange(port, 'GET http://xn--a/v1/tools HTTP/1.1\r\nConnection: close\r\n\r\n'))).toEqual(['HTTP/1.1 400']);
  });

  it('an HTTP/1.0 request with Transfer-Encoding is refused 400, and what follows it on the connection is not run, whatever the form of its target', async () => {
    // What a front end that frames HTTP/1.0 by the connection (no transfer coding in 1.0) reads as one body.
    const behind = 'GET /healthz HTTP/1.1\r\nHost: gw.local\r\nConnection: close\r\n\r\n';
    const send = (target: string) => exchange(port, `POST ${target} HTTP/1.0\r\nHost: gw.local\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${behind}`);
    expect(statusLines(await send('/v1/orgs'))).toEqual(['HTTP/1.1 400']);
    expect(statusLines(await send('http://xn--a/v1/orgs'))).toEqual(['HTTP/1.1 400']);
  });
});

describe('an absolute-form target with a non-numeric port, on the built gateway', () => {
  let gw: GatewayProcess;
  beforeAll(async () => {
    gw = await startGatewayProcess({});
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
  });

  it('writes neither its user-info nor its query string anywhere in the process output (Node printed the target as a DEP0170 warning)', async () => {
    const r = await raw(Number(new URL(gw.url).port), 'GET', 'http://deploy:Pw-7rX2-userinfo-secret@gw.local:abc/v1/tool-calls?access_token=qs-secret-91ab77');
    expect(r.status).toBe(400);
    await new Promise((res) => setTimeout(res, 300)); // stderr is piped: let it arrive
    const leaked = gw.output().split('\n').filter((l) => l.includes('Pw-7rX2-userinfo-secret') || l.includes('qs-secret-91ab77'));
    expect(leaked).toEqual([]);
  });
});
