import { randomBytes, randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { Controller, Get, Logger } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { beginHttpDrain } from '../../src/app.setup.js';
import { Roles } from '../../src/auth/auth.decorators.js';
import { createGateway } from '../../src/bootstrap.js';
import { loadConfig } from '../../src/config/app-config.js';
import { captureLogs, loggedPath, pinoHttpOptions, requestPath } from '../../src/logging/logging.js';
import { MetricsService } from '../../src/metrics/metrics.service.js';
import request from 'supertest';
import { requestDuringDrain } from '../support/drain-request.js';
import { rawExchange, recordingResponses } from '../support/response-log.js';
import { TEST_ADMIN_KEY, TEST_MASTER_KEY } from '../support/secrets.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

@Controller('v1/test-log')
class LoggingController {
  private readonly log = new Logger('Probe');

  @Get()
  @Roles('admin')
  hello(): { ok: true } {
    this.log.log('inside the handler');
    return { ok: true };
  }
}

interface LogLine {
  msg: string;
  correlationId?: string;
  req?: { method: string; path: string };
  res?: { statusCode: number };
}

/** The lines about one request (its correlation id), parsed. The response log line is written on 'finish'. */
async function linesOf(logs: string[], correlationId: string): Promise<LogLine[]> {
  await new Promise((r) => setTimeout(r, 100));
  return logs
    .flatMap((chunk) => chunk.split('\n'))
    .filter((l) => l.includes(correlationId))
    .map((l) => JSON.parse(l) as LogLine);
}

/** The one request log line ("request completed" / "request errored") of a request. */
async function requestLine(logs: string[], correlationId: string): Promise<LogLine[]> {
  return (await linesOf(logs, correlationId)).filter((l) => /^request /.test(l.msg));
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

  it('a token pasted into the path (where a flag name belongs) is redacted in the line; ids stay', async () => {
    const token = `shpat_${randomBytes(16).toString('hex')}`;
    const org = randomUUID();
    const lines = await linesDuring(() => t.http.put(`/v1/orgs/${org}/feature-flags/${token}`).set(adminAuth).send({ enabled: true }));
    const text = lines.join('');
    expect(text).toContain(`"path":"/v1/orgs/${org}/feature-flags/[REDACTED]"`);
    expect(text).not.toContain(token.slice(6));
    expect(loggedPath(`/v1/runs/${org}/tool-calls:batch?x=1`)).toBe(`/v1/runs/${org}/tool-calls:batch`);
  });

  it('an absolute-form target with userinfo and a query: the line holds the path, not the credential or the query', async () => {
    const port = (t.app.getHttpServer().address() as { port: number }).port;
    const lines = await linesDuring(() =>
      rawExchange(port, 'GET http://opsuser:SUPERSECRETPW@127.0.0.1/v1/orgs?token=QSECRET HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'),
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

/**
 * Every answer carries an X-Correlation-Id for ops to look up: the ones given before the routes (by the middleware
 * ahead of Nest's own) too. Each is logged once, in the usual shape; a log made inside a handler still carries the
 * request's bindings.
 */
describe('request log: answers given before the routes', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('an ordinary answer is logged once, in the usual shape', async () => {
    const res = await t.http.get('/v1/api-keys').set(adminAuth).set('X-Correlation-Id', 'rl-ordinary-1');
    expect(res.status).toBe(200);
    expect(await requestLine(t.logs, 'rl-ordinary-1')).toEqual([
      expect.objectContaining({ msg: 'request completed', correlationId: 'rl-ordinary-1', req: { method: 'GET', path: '/v1/api-keys' }, res: { statusCode: 200 } }),
    ]);
  });

  it('a 413 (body over the limit) is logged with its correlation id', async () => {
    const res = await t.http.post('/v1/orgs').set(adminAuth).set('Content-Type', 'application/json').send(JSON.stringify({ name: 'x'.repeat(70_000) }));
    expect(res.status).toBe(413);
    const cid = res.headers['x-correlation-id'] as string;
    expect(await requestLine(t.logs, cid)).toEqual([
      expect.objectContaining({ msg: 'request completed', correlationId: cid, req: { method: 'POST', path: '/v1/orgs' }, res: { statusCode: 413 } }),
    ]);
  });

  it('a 400 for %00 in the URL is logged, without its query', async () => {
    const res = await t.http.get('/v1/tool-calls?correlationId=a%00b').set(adminAuth);
    expect(res.status).toBe(400);
    const cid = res.headers['x-correlation-id'] as string;
    expect(await requestLine(t.logs, cid)).toEqual([
      expect.objectContaining({ msg: 'request completed', req: { method: 'GET', path: '/v1/tool-calls' }, res: { statusCode: 400 } }),
    ]);
  });

  it("a 400 for a malformed % escape in the path (the router's) is logged", async () => {
    const res = await t.http.get('/v1/orgs/%zz').set(adminAuth);
    expect(res.status).toBe(400);
    const cid = res.headers['x-correlation-id'] as string;
    expect(await requestLine(t.logs, cid)).toEqual([
      expect.objectContaining({ msg: 'request completed', req: { method: 'GET', path: '/v1/orgs/%zz' }, res: { statusCode: 400 } }),
    ]);
  });

  it('a 400 for a missing or repeated Host, and a 415 for a transfer coding, are logged once with the correlation id they answer', async () => {
    const port = (t.app.getHttpServer().address() as { port: number }).port;
    for (const [cid, text, status] of [
      ['rl-no-host-1', 'GET /v1/api-keys HTTP/1.1\r\nX-Correlation-Id: rl-no-host-1\r\n\r\n', 400],
      ['rl-two-hosts-1', 'GET /v1/api-keys HTTP/1.1\r\nHost: a\r\nHost: b\r\nX-Correlation-Id: rl-two-hosts-1\r\n\r\n', 400],
      ['rl-te-1', 'GET /v1/api-keys HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\nX-Correlation-Id: rl-te-1\r\n\r\n0\r\n\r\n', 415],
    ] as const) {
      const answer = await rawExchange(port, text);
      expect(answer).toMatch(new RegExp(`^HTTP/1\\.1 ${status} [^]*\r\nX-Correlation-Id: ${cid}\r\n[^]*"correlationId":"${cid}"`));
      expect(await requestLine(t.logs, cid), cid).toEqual([
        expect.objectContaining({ msg: 'request completed', correlationId: cid, req: { method: 'GET', path: '/v1/api-keys' }, res: { statusCode: status } }),
      ]);
    }
  });

  it('a 503 GATEWAY_STOPPING during the drain is logged and counted in http_request_duration_seconds', async () => {
    const other = await startTestApp();
    try {
      // Its connection open and its body still coming when the drain begins (a new connection is refused then).
      const res = await requestDuringDrain(other.app.getHttpServer() as Server, () => beginHttpDrain(other.app), {
        method: 'POST',
        path: '/v1/orgs',
        headers: { Authorization: adminAuth.Authorization, 'X-Correlation-Id': 'rl-drain-1' },
        body: JSON.stringify({ name: 'never created' }),
      });
      expect([res.status, (JSON.parse(res.body) as { code: string }).code]).toEqual([503, 'GATEWAY_STOPPING']);
      expect(await requestLine(other.logs, 'rl-drain-1')).toEqual([
        expect.objectContaining({ msg: 'request errored', correlationId: 'rl-drain-1', req: { method: 'POST', path: '/v1/orgs' }, res: { statusCode: 503 } }),
      ]);
      const metrics = await other.app.get(MetricsService).render();
      expect(metrics).toMatch(/^http_request_duration_seconds_count\{method="POST",route="unmatched",status="503"\} 1$/m);
    } finally {
      await other.app.close();
    }
  });

  it("a log made inside a handler carries the request's bindings", async () => {
    const config = loadConfig({
      NODE_ENV: 'test', DATABASE_URL: process.env.DATABASE_URL, MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY,
      BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY, RATE_LIMIT_RPS: '0', LOG_LEVEL: 'info', DATA_DIR: '.tmp/data-test',
    });
    const { lines, stop } = captureLogs();
    const { app } = await createGateway(config, { extraControllers: [LoggingController] });
    try {
      const res = await recordingResponses(request(app.getHttpServer())).get('/v1/test-log').set(adminAuth).set('X-Correlation-Id', 'rl-inside-1');
      expect(res.status).toBe(200);
      const mine = await linesOf(lines, 'rl-inside-1');
      expect(mine.find((l) => l.msg === 'inside the handler')).toMatchObject({ correlationId: 'rl-inside-1', req: { method: 'GET', path: '/v1/test-log' }, context: 'Probe' });
      expect(mine.filter((l) => /^request /.test(l.msg))).toHaveLength(1);
    } finally {
      stop();
      await app.close();
    }
  });
});

/**
 * A client hammering the gateway is named in each answer's line: by the address the rate limiters meter it by (behind
 * TRUST_PROXY_HOPS proxies, the one they report), and once its key is known, by the key's id and org. Ids only: never
 * the key, never a header.
 */
describe('request log: who sent it', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ AUTH_FAILURE_RPS: '2', RATE_LIMIT_RPS: '3', TRUST_PROXY_HOPS: '1' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const answered = async (send: () => request.Test): Promise<{ status: number; line: LogLine & Record<string, unknown> }> => {
    const res = await send();
    const lines = await requestLine(t.logs, res.headers['x-correlation-id'] as string);
    expect(lines).toHaveLength(1);
    return { status: res.status, line: lines[0] as LogLine & Record<string, unknown> };
  };

  it('made-up keys, answered 401 then 429: each line names the client address they are metered by, and no key', async () => {
    const keys = Array.from({ length: 6 }, (_, i) => `tgw_madeup${i}_${randomBytes(16).toString('hex')}`);
    const answers = [];
    for (const key of keys) answers.push(await answered(() => t.http.get('/v1/tool-calls').set(bearer(key)).set('X-Forwarded-For', '203.0.113.7')));
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([401, 429]));
    for (const { status, line } of answers) {
      expect(line).toMatchObject({ msg: 'request completed', client: '203.0.113.7', res: { statusCode: status } });
      expect(line).not.toHaveProperty('keyId');
    }
    const text = JSON.stringify(answers);
    for (const key of keys) expect(text).not.toContain(key);
  });

  it('a valid key, answered 200 then 429 RATE_LIMITED: each line names its key id and org, never the key', async () => {
    const orgId = await createOrg(t, 'Hammering Org');
    const agent = await createKey(t, orgId, 'agent');
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await answered(() => t.http.get('/v1/approvals').set(bearer(agent.key))));
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([200, 429]));
    for (const { status, line } of answers) {
      expect(line).toMatchObject({ client: '127.0.0.1', keyId: agent.id, orgId, res: { statusCode: status } });
      // An error answer's line names its problem code (a 409 of one kind told from another); a 200's names none.
      if (status === 429) expect(line.code).toBe('RATE_LIMITED');
      else expect(line).not.toHaveProperty('code');
    }
    const text = JSON.stringify(answers);
    expect(text).not.toContain(agent.key);
    expect(text).not.toMatch(/authorization|bearer/i);
  });

  it('a load balancer\'s X-Request-Id is logged beside the correlation id (its access log joins the gateway\'s); a malformed one is not', async () => {
    const tagged = await answered(() => t.http.get('/healthz-not-a-route').set('X-Request-Id', 'lb-7f3a9c'));
    expect(tagged.line).toMatchObject({ requestId: 'lb-7f3a9c' });
    expect(tagged.line.correlationId).not.toBe('lb-7f3a9c'); // the correlation id is still the gateway's (API.md)
    const bad = await answered(() => t.http.get('/healthz-not-a-route').set('X-Request-Id', 'has a space'));
    expect(bad.line).not.toHaveProperty('requestId');
  });

  it('an X-Request-Id or X-Correlation-Id with a credential\'s shape is not taken: a fresh correlation id, no requestId, the token on no line', async () => {
    // Made-up tokens of Shopify's and this gateway's shapes (not named test secrets): what an Idempotency-Key may not hold either.
    const tokens = [`shpat_${randomBytes(16).toString('hex')}`, `tgw_${randomBytes(32).toString('base64url')}`];
    const from = t.logs.length;
    for (const token of tokens) {
      const res = await t.http.get('/healthz-not-a-route').set('X-Correlation-Id', token).set('X-Request-Id', token);
      const cid = res.headers['x-correlation-id'] as string;
      expect(cid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      const lines = await requestLine(t.logs, cid);
      expect(lines).toHaveLength(1);
      expect(lines[0]).not.toHaveProperty('requestId');
    }
    const logged = t.logs.slice(from).join('');
    for (const token of tokens) expect(logged).not.toContain(token);
    // An ordinary id of the same length and alphabet is still the client's.
    const plain = await answered(() => t.http.get('/healthz-not-a-route').set('X-Correlation-Id', `order-${randomBytes(8).toString('hex')}`).set('X-Request-Id', 'lb-7f3a9c'));
    expect(plain.line).toMatchObject({ requestId: 'lb-7f3a9c' });
    expect(plain.line.correlationId).toMatch(/^order-/);
  });

  it('a revoked key still in use: its 401 line names whose key it was (keyRevoked), and a warning says so once per lookup; a made-up key names none', async () => {
    const orgId = await createOrg(t, 'Revoked Key Org');
    const agent = await createKey(t, orgId, 'agent');
    expect((await t.http.get('/v1/approvals').set(bearer(agent.key))).status).toBe(200);
    expect((await t.http.delete(`/v1/api-keys/${agent.id}`).set(adminAuth)).status).toBe(204);
    const from = t.logs.length;
    const uses = [];
    for (let i = 0; i < 2; i++) uses.push(await answered(() => t.http.get('/v1/approvals').set(bearer(agent.key)).set('X-Forwarded-For', '203.0.113.99')));
    for (const { status, line } of uses) {
      expect(status).toBe(401);
      expect(line).toMatchObject({ client: '203.0.113.99', keyId: agent.id, orgId, keyRevoked: true, code: 'UNAUTHENTICATED', res: { statusCode: 401 } });
    }
    const madeUp = await answered(() => t.http.get('/v1/approvals').set(bearer(`tgw_madeup_${randomBytes(16).toString('hex')}`)).set('X-Forwarded-For', '203.0.113.98'));
    expect(madeUp.line).toMatchObject({ code: 'UNAUTHENTICATED', res: { statusCode: 401 } });
    expect(madeUp.line).not.toHaveProperty('keyId');
    expect(madeUp.line).not.toHaveProperty('keyRevoked');
    const warnings = t.logs.slice(from).flatMap((chunk) => chunk.split('\n')).filter((l) => l.includes('revoked API key used')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(warnings).toEqual([expect.objectContaining({ keyId: agent.id, orgId, level: 40 })]); // the second use was answered from the lookup's entry
    expect(JSON.stringify([uses, warnings])).not.toContain(agent.key);
  });

  it('a request line below LOG_LEVEL is silent before pino-http builds it; a 5xx is still an error line at warn and error', () => {
    const levelFor = (logLevel: string, status: number, url = '/v1/runs'): string => {
      const config = loadConfig({
        NODE_ENV: 'test', DATABASE_URL: process.env.DATABASE_URL, MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY,
        BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY, LOG_LEVEL: logLevel, DATA_DIR: '.tmp/data-test',
      });
      const [options] = pinoHttpOptions(config);
      const req = { url } as Parameters<NonNullable<typeof options.customLogLevel>>[0];
      const res = { statusCode: status } as Parameters<NonNullable<typeof options.customLogLevel>>[1];
      return options.customLogLevel!(req, res, undefined);
    };
    const levels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];
    expect(levels.map((l) => levelFor(l, 200))).toEqual(['info', 'info', 'info', 'silent', 'silent', 'silent', 'silent']);
    expect(levels.map((l) => levelFor(l, 404))).toEqual(['info', 'info', 'info', 'silent', 'silent', 'silent', 'silent']);
    expect(levels.map((l) => levelFor(l, 503))).toEqual(['error', 'error', 'error', 'error', 'error', 'silent', 'silent']);
    expect(levels.map((l) => levelFor(l, 503, '/readyz'))).toEqual(['error', 'error', 'error', 'error', 'error', 'silent', 'silent']);
    expect(levels.map((l) => levelFor(l, 200, '/readyz'))).toEqual(levels.map(() => 'silent'));
  });

  it('an answer logged as an error (a 5xx) names its caller as a completed one does', () => {
    const config = loadConfig({
      NODE_ENV: 'test', DATABASE_URL: process.env.DATABASE_URL, MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY,
      BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY, LOG_LEVEL: 'info', DATA_DIR: '.tmp/data-test',
    });
    const [options] = pinoHttpOptions(config);
    const keyId = randomUUID();
    const orgId = randomUUID();
    const req = { ip: '198.51.100.4', socket: { remoteAddress: '127.0.0.1' }, authenticatedKey: { keyId, orgId } };
    const line = { responseTime: 3 };
    const asError = (options.customErrorObject as (...a: unknown[]) => object)(req, {}, new Error('x'), line);
    const asSuccess = (options.customSuccessObject as (...a: unknown[]) => object)(req, {}, line);
    expect(asError).toEqual({ client: '198.51.100.4', keyId, orgId, responseTime: 3 });
    expect(asError).toEqual(asSuccess);
    const anonymous = (options.customErrorObject as (...a: unknown[]) => object)({ ip: '198.51.100.4', socket: {} }, {}, new Error('x'), line);
    expect(anonymous).toEqual({ client: '198.51.100.4', responseTime: 3 });
  });
});
