/**
 * README "Logs": "Every answer has a `request completed` line (`request errored` for a 5xx) with `correlationId`,
 * `req: {method, path}` ..., `res: {statusCode}`". app.setup.ts: "The request log and the metrics see every answer
 * given after the correlation id". bootstrap.ts (handleClientError) on a 408: "the answer carries its correlation
 * id, the one its request log line has".
 *
 * The answers bootstrap.ts gives outside Express (checkContinue's 413, checkExpectation's 417, clientError's 431 /
 * 400 / 408, the 400 to CONNECT) hand the client a correlation id (header and body): each has one request log line
 * carrying it, in the shape of every other (and nothing more of the request than its method and path), and one
 * http_request_duration_seconds sample (route "unmatched"). The 408 to a body that stopped arriving is its request's
 * own line, with status 408, not pino-http's "request aborted" with no status.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MetricsService } from '../../src/metrics/metrics.service.js';
import { rawExchange } from '../support/response-log.js';
import { TEST_ADMIN_KEY } from '../support/secrets.js';
import { adminAuth, startTestApp, type TestApp } from '../support/test-app.js';


interface Line {
  level: number;
  msg: string;
  correlationId?: string;
  client?: string;
  req?: { method?: string; path?: string };
  res?: { statusCode: number | null };
  responseTime?: number;
}
const parsed = (logs: string[]): Line[] =>
  logs
    .flatMap((c) => c.split('\n'))
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line);
/** The request log lines ("request completed" / "errored" / "aborted") carrying a correlation id. */
const linesFor = (logs: string[], cid: string): Line[] => parsed(logs).filter((l) => l.correlationId === cid && /^request /.test(l.msg));
/** http_request_duration_seconds samples with these exact labels. */
const sampleCount = (text: string, labels: string): number =>
  text
    .split('\n')
    .filter((l) => l.startsWith(`http_request_duration_seconds_count{${labels}} `))
    .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
const correlationIdIn = (answer: string): string => /"correlationId":"([^"]+)"/.exec(answer)?.[1] ?? 'none';

describe('answers given outside Express are in the request log and in http_request_duration_seconds', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await startTestApp({ HTTP_REQUEST_TIMEOUT_MS: '1500' });
    port = (t.app.getHttpServer().address() as { port: number }).port;
  });
  afterAll(async () => {
    await t?.close();
  });

  const auth = `Authorization: ${adminAuth.Authorization}\r\n`;
  const post = (cid: string, headers: string) =>
    `POST /v1/orgs?token=QSECRET HTTP/1.1\r\nHost: x\r\n${auth}X-Correlation-Id: ${cid}\r\nContent-Type: application/json\r\n${headers}\r\n`;
  const cases: { name: string; status: number; text: string; req: Line['req']; method: string; holdMs?: number; settleMs?: number }[] = [
    { name: '413 to Expect: 100-continue over the limit', status: 413, text: post('ox-413-expect', 'Content-Length: 100000\r\nExpect: 100-continue\r\n'), req: { method: 'POST', path: '/v1/orgs' }, method: 'POST' },
    { name: '417 to another Expect', status: 417, text: post('ox-417-expect', 'Content-Length: 2\r\nExpect: something-else\r\n'), req: { method: 'POST', path: '/v1/orgs' }, method: 'POST' },
    { name: '431 to headers over the limit (no request parsed: no method or path)', status: 431, text: `GET /v1/orgs?token=QSECRET HTTP/1.1\r\nHost: x\r\n${auth}X-Big: ${'a'.repeat(40_000)}\r\n\r\n`, req: {}, method: 'unknown' },
    { name: '400 to a request that is not HTTP (no request parsed: no method or path)', status: 400, text: `GET /v1/orgs?token=QSECRET HTTP/1.1\r\nHost: x\r\nBad Header With Spaces\r\n\r\n`, req: {}, method: 'unknown' },
    { name: '400 to CONNECT (its target is no path: the method alone)', status: 400, text: 'CONNECT user:QSECRET@vendor.example:443 HTTP/1.1\r\nHost: vendor.example:443\r\nX-Correlation-Id: ox-connect\r\n\r\n', req: { method: 'CONNECT' }, method: 'CONNECT' },
    // Held past the answer's close (endWithProblem destroys the socket within 1 s): a second line, pino-http's
    // "request aborted" when the connection closes, would be there by then.
    { name: '408 to a body that stopped arriving (the request\'s own line, not "request aborted")', status: 408, text: `${post('ox-408-trickle', 'Content-Length: 50\r\n')}{"name":"QBODY`, req: { method: 'POST', path: '/v1/orgs' }, method: 'POST', holdMs: 8_000, settleMs: 1_500 },
  ];
  for (const c of cases) {
    it(`${c.name}: one request log line with the correlation id given and the status, one metric sample`, async () => {
      const metrics = t.app.get(MetricsService);
      const labels = `method="${c.method}",route="unmatched",status="${c.status}"`;
      const before = sampleCount(await metrics.render(), labels);
      const logsBefore = t.logs.length;
      const answer = await rawExchange(port, c.text, c.holdMs);
      expect(answer).toMatch(new RegExp(`^HTTP/1\\.1 ${c.status} `));
      const cid = correlationIdIn(answer);
      expect(answer).toContain(`X-Correlation-Id: ${cid}\r\n`);
      await new Promise((r) => setTimeout(r, c.settleMs ?? 200));
      const lines = linesFor(t.logs, cid);
      expect.soft(lines.map((l) => [l.msg, l.res?.statusCode]), `request log lines for ${cid}`).toEqual([['request completed', c.status]]);
      expect.soft(sampleCount(await metrics.render(), labels) - before, `http_request_duration_seconds{${labels}}`).toBe(1);
      expect(lines[0]).toMatchObject({ level: 30, req: c.req, client: '127.0.0.1', res: { statusCode: c.status } });
      expect(lines[0]!.req).toEqual(c.req);
      expect(typeof lines[0]!.responseTime).toBe('number');
      // Nothing of the request beyond its method and path: no query, no header (the key, the oversized field), no body.
      const written = t.logs.slice(logsBefore).join('');
      for (const sent of ['QSECRET', TEST_ADMIN_KEY, 'aaaaaaaaaaaaaaaa', 'Bad Header', 'QBODY']) expect(written).not.toContain(sent);
    });
  }

  it('the 413 to Expect: 100-continue has the same line (fields and their order) as the 413 Express gives the same request without Expect', async () => {
    await rawExchange(port, post('ox-413-in-express', 'Content-Length: 100000\r\n'), 1_000);
    await rawExchange(port, post('ox-413-outside', 'Content-Length: 100000\r\nExpect: 100-continue\r\n'));
    await new Promise((r) => setTimeout(r, 200));
    const [inside] = linesFor(t.logs, 'ox-413-in-express');
    const [outside] = linesFor(t.logs, 'ox-413-outside');
    expect(inside).toMatchObject({ msg: 'request completed', res: { statusCode: 413 } });
    expect(Object.keys(outside!)).toEqual(Object.keys(inside!));
    const comparable = ({ level, msg, req, client, res }: Line) => ({ level, msg, req, client, res });
    expect(comparable(outside!)).toEqual(comparable(inside!));
  });
});
