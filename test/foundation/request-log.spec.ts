import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestPath } from '../../src/logging/logging.js';
import { logSocketAnswer } from '../support/response-log.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/** One raw HTTP/1.1 exchange, for request targets supertest would not send as they are. */
function raw(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(text));
    let out = '';
    s.setEncoding('utf8').on('data', (c: string) => (out += c));
    s.on('close', () => {
      logSocketAnswer(text, out); // the run-wide leak scan reads it
      resolve(out);
    });
    s.on('error', () => resolve(out));
    setTimeout(() => s.destroy(), 2_000);
  });
}

/**
 * The request log names a request by method and path only: never its query, never what an absolute-form target
 * carries before the path (userinfo is a credential); probes that pass are not logged at all.
 */
describe('request log lines', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  const linesDuring = async (act: () => Promise<unknown>): Promise<string[]> => {
    const n = t.logs.length;
    await act();
    await new Promise((r) => setTimeout(r, 100)); // the response log line is written on 'finish'
    return t.logs.slice(n);
  };

  it('requestPath keeps the path alone', () => {
    expect(requestPath('/v1/tool-calls?orgId=x&token=abc')).toBe('/v1/tool-calls');
    expect(requestPath('http://opsuser:pw@127.0.0.1/v1/orgs?x=1')).toBe('/v1/orgs');
    expect(requestPath('https://u:p@host:8080')).toBe('/');
    expect(requestPath(undefined)).toBe('/');
    // As routed: no dot segment resolved, so a path that only resolves to a probe is neither renamed nor silenced.
    expect(requestPath('/v1/runs/../api-keys')).toBe('/v1/runs/../api-keys');
    expect(requestPath('/v1/%2e%2e/healthz#x')).toBe('/v1/%2e%2e/healthz');
  });

  it('an absolute-form target with userinfo and a query: the line holds the path, not the credential or the query', async () => {
    const port = (t.app.getHttpServer().address() as { port: number }).port;
    const lines = await linesDuring(() =>
      raw(port, 'GET http://opsuser:SUPERSECRETPW@127.0.0.1/v1/orgs?token=QSECRET HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'),
    );
    const text = lines.join('');
    expect(text).toContain('"path":"/v1/orgs"');
    expect(text).not.toContain('SUPERSECRETPW');
    expect(text).not.toContain('opsuser');
    expect(text).not.toContain('QSECRET');
  });

  it('passing probes are not logged, whatever their query; an ordinary request is', async () => {
    const probes = await linesDuring(async () => {
      for (let i = 0; i < 3; i++) expect((await t.http.get('/readyz')).status).toBe(200);
      await t.http.get('/healthz?probe=1');
      await t.http.get('/metrics?x=1');
    });
    expect(probes.filter((l) => l.includes('"path":'))).toEqual([]);
    const other = await linesDuring(() => t.http.get('/v1/orgs'));
    expect(other.some((l) => l.includes('"path":"/v1/orgs"'))).toBe(true);
  });
});
