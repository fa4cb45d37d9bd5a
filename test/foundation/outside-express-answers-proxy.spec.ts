/**
 * Behind a proxy (TRUST_PROXY_HOPS=1), an answer given outside Express (the 413 to Expect: 100-continue, the 417) names
 * the client its request log line names for any other answer: the address the proxy forwarded, as req.ip gives it,
 * not the proxy's (the request never went through Express, so it has no req.ip of its own).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawExchange } from '../support/response-log.js';
import { adminAuth, startTestApp, type TestApp } from '../support/test-app.js';

const lineFor = (logs: string[], cid: string) =>
  logs
    .flatMap((c) => c.split('\n'))
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; correlationId?: string; client?: string; res?: { statusCode: number } })
    .find((l) => l.correlationId === cid && /^request /.test(l.msg));

describe('outside-Express answers behind a proxy (TRUST_PROXY_HOPS=1)', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await startTestApp({ TRUST_PROXY_HOPS: '1' });
    port = (t.app.getHttpServer().address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
  });
  const post = (cid: string, headers: string) =>
    `POST /v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: ${adminAuth.Authorization}\r\nX-Forwarded-For: 203.0.113.7\r\nX-Correlation-Id: ${cid}\r\nContent-Type: application/json\r\n${headers}\r\n`;

  it('the 413 to Expect: 100-continue names the same client as the 413 Express gives the same request', async () => {
    await rawExchange(port, post('dx-413-in-express', 'Content-Length: 100000\r\n'));
    await rawExchange(port, post('dx-413-outside', 'Content-Length: 100000\r\nExpect: 100-continue\r\n'));
    await new Promise((r) => setTimeout(r, 300));
    const inside = lineFor(t.logs, 'dx-413-in-express');
    const outside = lineFor(t.logs, 'dx-413-outside');
    expect(inside).toMatchObject({ res: { statusCode: 413 }, client: '203.0.113.7' });
    expect(outside).toMatchObject({ res: { statusCode: 413 } });
    expect(outside!.client).toBe(inside!.client);
  });

  it('the 417 to another Expect names the forwarded client too', async () => {
    await rawExchange(port, post('dx-417-outside', 'Content-Length: 2\r\nExpect: something-else\r\n'));
    await new Promise((r) => setTimeout(r, 300));
    expect(lineFor(t.logs, 'dx-417-outside')).toMatchObject({ res: { statusCode: 417 }, client: '203.0.113.7' });
  });
});
