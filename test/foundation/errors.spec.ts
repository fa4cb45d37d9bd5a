import { gzipSync } from 'node:zlib';
import { Controller, Get } from '@nestjs/common';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Roles } from '../../src/auth/auth.decorators.js';
import { createGateway } from '../../src/bootstrap.js';
import { Clock } from '../../src/common/clock.js';
import { loadConfig } from '../../src/config/app-config.js';
import { captureLogs } from '../../src/logging/logging.js';
import request from 'supertest';
import { recordingResponses } from '../support/response-log.js';
import { TEST_ADMIN_KEY, TEST_MASTER_KEY } from '../support/secrets.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

@Controller('v1/test-boom')
class BoomController {
  @Get()
  @Roles('admin')
  boom(): never {
    throw new Error('secret internals: password=hunter2 at db.ts:42');
  }
}

describe('errors, limits and correlation ids', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('rejects unknown fields with 400 problem+json naming the field', async () => {
    const res = await t.http.post('/v1/orgs').set(adminAuth).send({ name: 'x', color: 'blue' });
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 400, code: 'VALIDATION_FAILED', title: expect.any(String), type: expect.any(String) });
    expect(res.body.detail).toContain('color');
    expect(res.body.correlationId).toBe(res.headers['x-correlation-id']);
  });

  it('names the field of a wrong type', async () => {
    const res = await t.http.post('/v1/orgs').set(adminAuth).send({ name: 42 });
    expect(res.status).toBe(400);
    expect(res.body.detail).toContain('name');
  });

  it('names only the rule a value breaks: a limit that is no integer is not also "greater than 200", a missing list not "more than 1000 items"', async () => {
    const org = await createOrg(t, 'validation detail');
    const ops = (await createKey(t, org, 'ops')).key;
    for (const [query, detail] of [
      ['limit=1.5', 'limit: limit must be an integer number'],
      ['limit=abc', 'limit: limit must be an integer number'],
      ['limit=0', 'limit: limit must not be less than 1'],
      ['limit=201', 'limit: limit must not be greater than 200'],
    ]) {
      for (const path of ['/v1/tool-calls', '/v1/ledger/events', '/v1/approvals']) {
        const res = await t.http.get(`${path}?${query}`).set(bearer(ops));
        expect([res.status, res.body.code, res.body.detail], `${path}?${query}`).toEqual([400, 'VALIDATION_FAILED', detail]);
      }
    }
    for (const body of [{}, { items: 'all' }]) {
      const res = await t.http.put(`/v1/orgs/${org}/tool-permissions`).set(adminAuth).send(body);
      expect([res.status, res.body.code, res.body.detail], JSON.stringify(body)).toEqual([400, 'VALIDATION_FAILED', 'items: items must be an array']);
    }
    const tooMany = Array.from({ length: 1001 }, () => ({ toolName: 'a', action: 'b', specialistId: null, enabled: true })); // under the 64 KiB body limit
    const res = await t.http.put(`/v1/orgs/${org}/tool-permissions`).set(adminAuth).send({ items: tooMany });
    expect([res.status, res.body.detail]).toEqual([400, 'items: items must contain no more than 1000 elements']);
  });

  it('a JSON body that is no object is told so, in the same words on every route (no body, or null, is an empty object)', async () => {
    const org = await createOrg(t, 'body shape');
    const agent = (await createKey(t, org, 'agent')).key;
    const run = (await t.http.post('/v1/runs').set(bearer(agent)).send({ specialistId: 'support' })).body.id as string;
    const cases: [string, string, string, Record<string, string>][] = [
      ['post', '/v1/runs', '[{}]', bearer(agent)],
      ['post', `/v1/runs/${run}/complete`, '"x"', bearer(agent)],
      ['post', '/v1/orgs', 'true', adminAuth],
      ['put', `/v1/orgs/${org}/feature-flags/tool_calling_enabled`, '5', adminAuth],
    ];
    const kinds: Record<string, string> = { '[{}]': 'an array', '"x"': 'a string', true: 'a boolean', 5: 'a number' };
    for (const [method, path, text, auth] of cases) {
      const res = await t.http[method as 'post' | 'put'](path).set(auth).set('Content-Type', 'application/json').send(text);
      expect([res.status, res.body.code, res.body.detail], `${method} ${path} ${text}`).toEqual([400, 'VALIDATION_FAILED', `body: must be a JSON object, not ${kinds[text]}`]);
    }
    const ended = await t.http.post(`/v1/runs/${run}/complete`).set(bearer(agent)).set('Content-Type', 'application/json').send('null');
    expect([ended.status, ended.body.status]).toEqual([200, 'completed']);
  });

  it('answers 413 for a 600 KiB body and 400 for broken or too deep JSON', async () => {
    const big = await t.http.post('/v1/orgs').set(adminAuth).set('Content-Type', 'application/json').send(JSON.stringify({ name: 'x'.repeat(600 * 1024) }));
    expect(big.status).toBe(413);
    expect(big.body.code).toBe('PAYLOAD_TOO_LARGE');
    const broken = await t.http.post('/v1/orgs').set(adminAuth).set('Content-Type', 'application/json').send('{"name": ');
    expect(broken.status).toBe(400);
    expect(broken.body.code).toBe('BAD_REQUEST');
    const deep = await t.http.post('/v1/orgs').set(adminAuth).set('Content-Type', 'application/json').send('['.repeat(40) + ']'.repeat(40));
    expect(deep.status).toBe(400);
  });

  it('order of checks (API.md §9): a refused body is answered only after authentication and role — 401, then 403, then 415/400', async () => {
    const org = await createOrg(t);
    const ops = await createKey(t, org, 'ops');
    const cases: [contentType: string, body: string, status: number, code: string][] = [
      ['text/plain', 'hello', 415, 'UNSUPPORTED_MEDIA_TYPE'],
      ['application/json-seq', '{"name":"x"}', 415, 'UNSUPPORTED_MEDIA_TYPE'],
      ['application/json; charset=utf-16', '{"name":"x"}', 415, 'UNSUPPORTED_MEDIA_TYPE'],
      ['application/json', '{"name": ', 400, 'BAD_REQUEST'],
      ['application/json', '['.repeat(40) + ']'.repeat(40), 400, 'BAD_REQUEST'],
    ];
    for (const [type, body, status, code] of cases) {
      const anonymous = await t.http.post('/v1/orgs').set('Content-Type', type).send(body);
      expect([anonymous.status, anonymous.body.code]).toEqual([401, 'UNAUTHENTICATED']);
      const wrongKey = await t.http.post('/v1/orgs').set({ Authorization: 'Bearer tgw_not_a_key', 'Content-Type': type }).send(body);
      expect(wrongKey.status).toBe(401);
      const wrongRole = await t.http.post('/v1/orgs').set({ Authorization: `Bearer ${ops.key}`, 'Content-Type': type }).send(body);
      expect([wrongRole.status, wrongRole.body.code]).toEqual([403, 'FORBIDDEN']);
      const allowed = await t.http.post('/v1/orgs').set({ ...adminAuth, 'Content-Type': type }).send(body);
      expect([allowed.status, allowed.body.code]).toEqual([status, code]);
      expect(allowed.headers['content-type']).toMatch(/application\/problem\+json/);
    }
    // The size limit protects the reader whoever sends the body: 413 at once.
    const big = await t.http.post('/v1/orgs').set('Content-Type', 'application/json').send(JSON.stringify({ name: 'x'.repeat(600 * 1024) }));
    expect(big.status).toBe(413);
  });

  it('takes JSON in UTF-8 only, uncompressed: a charset or Content-Encoding it would misread is 415, not "not valid JSON"', async () => {
    const post = (headers: Record<string, string>, body: string | Buffer) => t.http.post('/v1/orgs').set({ ...adminAuth, ...headers }).send(body);
    const json = JSON.stringify({ name: 'Charset Org' });
    for (const type of [
      'application/json; charset=utf-8',
      'application/json;charset="UTF-8"',
      'application/json;charset=UTF-8',
      'application/json; charset=utf-8; foo=bar',
      'application/json; charset=us-ascii',
      'application/json; profile="urn:x;charset=latin1"',
      'application/problem+json',
      'application/json',
    ]) {
      expect((await post({ 'Content-Type': type }, json)).status, type).toBe(201);
    }
    const gz = await post({ 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' }, gzipSync(json));
    expect([gz.status, gz.body.code]).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE']);
    expect(gz.body.detail).toMatch(/Content-Encoding/);
    // Every registered coding that transforms the body: encrypted or dictionary-compressed bytes are not "bad UTF-8".
    for (const coding of ['aes128gcm', 'dcb', 'dcz', 'exi', 'pack200-gzip', 'DCZ']) {
      const res = await post({ 'Content-Type': 'application/json', 'Content-Encoding': coding }, Buffer.from([0x5e, 0xff, 0x00, 0x81]));
      expect([res.status, res.body.code], coding).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE']);
    }
    // Codings that do not compress (identity, a list of them, a misconfigured "UTF-8") are read as they come.
    for (const coding of ['identity', 'identity, identity', 'UTF-8']) {
      expect((await post({ 'Content-Type': 'application/json', 'Content-Encoding': coding }, json)).status, coding).toBe(201);
    }
    const latin = await post({ 'Content-Type': 'application/json; charset=iso-8859-1' }, json);
    expect([latin.status, latin.body.code]).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE']);
  });

  it('echoes a given correlation id and makes one otherwise', async () => {
    const given = await t.http.get('/healthz').set('X-Correlation-Id', 'my-trace-123');
    expect(given.headers['x-correlation-id']).toBe('my-trace-123');
    const made = await t.http.get('/healthz');
    expect(made.headers['x-correlation-id']).toMatch(/^[0-9a-f-]{36}$/);
    // Any 1-255 printable ASCII without blanks is echoed as given (what the ledger filter takes); anything else is replaced.
    for (const id of ['req/123', 'svc:checkout#42', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'x'.repeat(255)]) {
      expect((await t.http.get('/healthz').set('X-Correlation-Id', id)).headers['x-correlation-id']).toBe(id);
    }
    for (const id of ['x'.repeat(256), 'has blanks']) {
      expect((await t.http.get('/healthz').set('X-Correlation-Id', id)).headers['x-correlation-id']).toMatch(/^[0-9a-f-]{36}$/);
    }
    const nf = await t.http.get('/no/such/route');
    expect(nf.status).toBe(404);
    expect(nf.body.code).toBe('NOT_FOUND');
  });

  it('answers 500 with no internals in the body and logs them with the correlation id', async () => {
    const config = loadConfig({
      NODE_ENV: 'test', DATABASE_URL: process.env.DATABASE_URL, MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY,
      BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY, RATE_LIMIT_RPS: '0', LOG_LEVEL: 'info',
    });
    const { lines, stop } = captureLogs();
    const { app } = await createGateway(config, { extraControllers: [BoomController] });
    try {
      const res = await recordingResponses(request(app.getHttpServer())).get('/v1/test-boom').set(adminAuth);
      expect(res.status).toBe(500);
      expect(res.body).toMatchObject({ code: 'INTERNAL', status: 500 });
      const text = JSON.stringify(res.body);
      expect(text).not.toContain('hunter2');
      expect(text).not.toContain('db.ts');
      expect(text).not.toContain('stack');
      const logged = lines.find((l) => l.includes('unhandled error'));
      expect(logged).toContain(res.body.correlationId);
      expect(logged).toContain('secret internals');
    } finally {
      stop();
      await app.close();
    }
  });

  it('a statement the database cancels (statement timeout, or an operator) → 503 DATABASE_UNAVAILABLE with Retry-After, not 500', async () => {
    // A stuck lock holds the org's row; the gateway's write waits behind it until the database cancels it.
    // Only this test's own org is locked, and only the backend it blocks is cancelled: other test files share the database.
    const org = await createOrg(t, 'Locked');
    const holder = t.ds.createQueryRunner();
    await holder.connect();
    try {
      await holder.startTransaction();
      await holder.query('SELECT 1 FROM orgs WHERE id = $1 FOR UPDATE', [org]);
      const [{ pid: holderPid }] = (await holder.query('SELECT pg_backend_pid() AS pid')) as { pid: number }[];
      const pending = t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: true }).then((r) => r);
      // Asked outside the holder's transaction: inside one, pg_stat_activity is a snapshot taken at its first read,
      // and a backend the pool opened after that (its idle connections close after 30 s) would never show.
      let blocked: { pid: number }[] = [];
      for (let i = 0; i < 400 && blocked.length === 0; i++) {
        blocked = (await t.ds.query('SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [holderPid])) as { pid: number }[];
        if (blocked.length === 0) await new Promise((r) => setTimeout(r, 25));
      }
      expect(blocked.length, 'the flag write to be waiting for the lock').toBe(1);
      // What a statement_timeout does (SQLSTATE 57014), without waiting 15 s for it.
      await holder.query('SELECT pg_cancel_backend($1)', [blocked[0].pid]);
      const res = await pending;
      expect(res.status, JSON.stringify(res.body)).toBe(503);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(res.body.code).toBe('DATABASE_UNAVAILABLE');
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    } finally {
      await holder.rollbackTransaction().catch(() => undefined);
      await holder.release();
    }
    // Nothing was half-written: the flag is still off, and setting it now works.
    expect((await t.http.get(`/v1/orgs/${org}/feature-flags`).set(adminAuth)).body).toMatchObject({ tool_calling_enabled: false });
    expect((await t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: true })).status).toBe(200);
  });

  it('rate-limits per key with 429 and Retry-After', async () => {
    const limited = await startTestApp({ RATE_LIMIT_RPS: '2' });
    try {
      const org = await createOrg(limited);
      let last;
      for (let i = 0; i < 8; i++) last = await limited.http.get(`/v1/orgs/${org}`).set(adminAuth);
      expect(last!.status).toBe(429);
      expect(last!.body.code).toBe('RATE_LIMITED');
      expect(Number(last!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    } finally {
      await limited.close();
    }
  });

  it('an address sending made-up keys gets 429 for keys the caches do not know, before the database is asked; keys in use keep working', async () => {
    const limited = await startTestApp({ AUTH_FAILURE_RPS: '2' }); // burst 4
    try {
      const org = await createOrg(limited); // the admin key is now cached
      const fresh = await createKey(limited, org, 'ops'); // never presented yet
      const madeUp = (i: number) => ({ Authorization: `Bearer tgw_made_up_${i}_${'x'.repeat(40)}` });
      // The burst (4) is looked up; then 429. On a loaded machine a request can take long enough for the bucket to
      // refill a token (2/s), so the refusal may come a few lookups later, never before the burst is spent.
      let lookedUp = 0;
      let refused = await limited.http.get('/v1/tool-calls').set(madeUp(0));
      while (refused.status === 401 && lookedUp < 12) {
        lookedUp++;
        refused = await limited.http.get('/v1/tool-calls').set(madeUp(lookedUp));
      }
      expect(lookedUp).toBeGreaterThanOrEqual(4);
      // A valid key not yet looked up waits too: it was refused before the lookup that would have found it. Sent
      // right after the refusal: half a second later the bucket holds a token again (2/s).
      const early = await limited.http.get('/v1/tool-calls').set(bearer(fresh.key));
      expect(refused.status).toBe(429);
      expect(refused.body).toMatchObject({ code: 'RATE_LIMITED' });
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(early.status).toBe(429);
      // A key already looked up is answered from the caches: a cached unknown key is still 401; the admin key, known
      // valid, still works, for writes too (looked up afresh, but not metered).
      expect((await limited.http.get('/v1/tool-calls').set(madeUp(0))).status).toBe(401);
      expect((await limited.http.get(`/v1/orgs/${org}`).set(adminAuth)).status).toBe(200);
      expect((await limited.http.post('/v1/orgs').set(adminAuth).send({ name: 'during a flood' })).status).toBe(201);
      const clock = limited.app.get(Clock); // the buckets refill on the gateway's Clock: moved on, not waited for
      clock.advance(Number(early.headers['retry-after']) * 1000);
      expect((await limited.http.get('/v1/tool-calls').set(bearer(fresh.key))).status).toBe(200);
      // Successful lookups do not spend the budget.
      for (let i = 0; i < 6; i++) {
        const k = await createKey(limited, org, 'ops');
        expect((await limited.http.get('/v1/tool-calls').set(bearer(k.key))).status).toBe(200);
      }
      // Requests presenting one key at once share one lookup: a burst with a valid key this replica has not
      // seen yet all pass, and a burst of one made-up key spends one unit (then its answer is cached).
      clock.advance(2_000);
      const burstKey = await createKey(limited, org, 'ops');
      const burst = await Promise.all(Array.from({ length: 40 }, () => limited.http.get('/v1/tool-calls').set(bearer(burstKey.key))));
      expect(burst.map((r) => r.status).filter((st) => st !== 200)).toEqual([]);
      const oneMadeUp = await Promise.all(Array.from({ length: 40 }, () => limited.http.get('/v1/tool-calls').set(madeUp(777))));
      expect(oneMadeUp.map((r) => r.status).filter((st) => st !== 401)).toEqual([]);
      // Lookups sent together cannot all pass: each spends before it is made. Burst 4 (spent again by the
      // wait above, refilled since): of 30 made-up keys at once at most 4 reach the database.
      // On a loaded machine the 30 take a while, and the bucket refills meanwhile: at most 2 more per second they took.
      clock.advance(2_000);
      const sentAt = performance.now();
      const together = await Promise.all(Array.from({ length: 30 }, (_, i) => limited.http.get('/v1/tool-calls').set(madeUp(1000 + i))));
      const refills = Math.ceil(((performance.now() - sentAt) / 1000) * 2);
      const statuses = together.map((r) => r.status);
      expect(statuses.filter((st) => st === 401).length).toBeLessThanOrEqual(4 + refills);
      expect(statuses.filter((st) => st === 429).length).toBeGreaterThanOrEqual(26 - refills);
      expect(statuses.filter((st) => st !== 401 && st !== 429)).toEqual([]);
    } finally {
      await limited.close();
    }
  });

  it('behind TRUST_PROXY_HOPS proxies, made-up keys are metered per client (X-Forwarded-For), not per proxy', async () => {
    const proxied = await startTestApp({ AUTH_FAILURE_RPS: '2', TRUST_PROXY_HOPS: '1' });
    const direct = await startTestApp({ AUTH_FAILURE_RPS: '2' });
    try {
      const madeUp = (i: number) => `Bearer tgw_made_up_${i}_${'y'.repeat(40)}`;
      const from = (t: TestApp, ip: string, i: number) => t.http.get('/v1/tool-calls').set('Authorization', madeUp(i)).set('X-Forwarded-For', ip);
      for (let i = 0; i < 4; i++) expect((await from(proxied, '203.0.113.5', i)).status).toBe(401);
      expect((await from(proxied, '203.0.113.5', 4)).status).toBe(429);
      expect((await from(proxied, '203.0.113.6', 5)).status).toBe(401); // another client behind the same proxy
      // Without it the header is not believed: a client cannot escape its budget by naming another address.
      for (let i = 0; i < 4; i++) expect((await from(direct, `198.51.100.${i}`, i)).status).toBe(401);
      expect((await from(direct, '198.51.100.99', 4)).status).toBe(429);
    } finally {
      await proxied.close();
      await direct.close();
    }
  });

  it('serves the OpenAPI document and metrics without a key', async () => {
    const doc = await t.http.get('/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.body.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.body.paths)).toContain('/v1/orgs');
    // Every operation documents the errors any route can answer, as problem+json.
    const ops = Object.entries(doc.body.paths as Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>>).flatMap(
      ([path, item]) => Object.entries(item).map(([method, op]) => ({ path, method, op })),
    );
    expect(ops.length).toBeGreaterThan(20);
    for (const { path, method, op } of ops) {
      for (const status of ['401', '403', '429', '503', ...(path.includes('{') ? ['404'] : []), ...(method === 'post' || method === 'put' ? ['400'] : [])]) {
        expect(op.responses[status], `${method} ${path} ${status}`).toBeDefined();
      }
    }
    for (const { path, method, op } of ops) {
      // A route's own @ApiResponse replaces Swagger's default success response: it must then document one itself.
      expect(Object.keys(op.responses).some((s) => s.startsWith('2')), `${method} ${path} documents a success`).toBe(true);
      // Every error can be problem+json (on the tool-call route 403/422 can also be the tool-call body, application/json).
      for (const [status, r] of Object.entries(op.responses)) {
        if (Number(status) >= 400) expect(Object.keys(r.content ?? {}), `${method} ${path} ${status}`).toContain('application/problem+json');
      }
      // An org key naming another org in an orgId filter gets 404.
      const params = (op as { parameters?: { name: string; in: string }[] }).parameters ?? [];
      if (params.some((x) => x.in === 'query' && x.name === 'orgId')) expect(op.responses['404'], `${method} ${path} 404`).toBeDefined();
    }
    const toolCall = doc.body.paths['/v1/runs/{runId}/tool-calls'].post.responses;
    for (const status of ['403', '422']) expect(Object.keys(toolCall[status].content).sort()).toEqual(['application/json', 'application/problem+json']);
    expect(doc.body.paths['/v1/runs'].post.responses['201'].content['application/json'].schema.required).toEqual(expect.arrayContaining(['id', 'orgId', 'status', 'manifest']));
    for (const [path, code] of [['/v1/approvals/{id}/decision', 'ACTION_DIGEST_MISMATCH'], ['/v1/approvals/{id}/decision', 'APPROVAL_ALREADY_DECIDED'], ['/v1/tool-calls/{id}/reconcile', 'NOT_RECONCILABLE'], ['/v1/orgs', 'CONFLICT']]) {
      expect(doc.body.paths[path].post.responses['409']?.description, `${path} 409 ${code}`).toContain(code);
    }
    expect(doc.body.info.description).toContain('no 405');
    expect(doc.body.paths['/v1/orgs'].post.responses['415'].content['application/problem+json'].schema.$ref).toBe('#/components/schemas/Problem');
    expect(doc.body.components.schemas.Problem.required).toContain('code');
    // Keys are opaque strings, not JWTs; nullable ids are strings, not objects.
    expect(doc.body.components.securitySchemes.bearer.bearerFormat).not.toBe('JWT');
    expect(doc.body.components.schemas.CreateApiKeyDto.properties.orgId).toMatchObject({ type: 'string', format: 'uuid', nullable: true });
    expect(doc.body.components.schemas.ToolPermissionDto.properties.specialistId).toMatchObject({ type: 'string', nullable: true });
    expect(doc.body.paths['/v1/api-keys'].post.responses['201'].content['application/json'].schema.required).toContain('key');
    const metrics = await t.http.get('/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('http_request_duration_seconds');
    expect(metrics.text).toContain('process_cpu_user_seconds_total');
  });
});
