/**
 * The OpenAPI document describes what the server really answers: each live
 * response below (status and media type) must be documented on its operation.
 */
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { beginHttpDrain } from '../../src/app.setup.js';
import { postApiKey } from '../support/api-keys.js';
import { requestDuringDrain } from '../support/drain-request.js';
import { adminAuth, bearer, createKey, startTestApp } from '../support/test-app.js';
import { approvalFor, refundUse } from '../approvals/support.js';

interface Response {
  description: string;
  content?: Record<string, { schema?: { $ref?: string; required?: string[] } }>;
  headers?: Record<string, unknown>;
}
interface Operation {
  parameters?: { name: string; in: string }[];
  responses: Record<string, Response>;
}
interface Doc {
  info: { description: string };
  paths: Record<string, Record<string, Operation>>;
}
interface Answer {
  status: number;
  headers: Record<string, string>;
  body: { code?: string; errorCode?: string; detail?: string };
}

describe('OpenAPI document matches the live answers', () => {
  let h: Harness;
  let o: OrgSetup;
  let doc: Doc;
  let ops: string;

  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    o = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
    ops = (await createKey(h.t, o.orgId, 'ops')).key;
    doc = (await h.t.http.get('/openapi.json')).body as Doc;
  });
  afterAll(async () => {
    await h?.close();
  });

  const operation = (method: string, path: string): Operation => {
    const op = doc.paths[path]?.[method];
    if (!op) throw new Error(`${method} ${path} is not in the OpenAPI document`);
    return op;
  };

  /** The answer's status is documented on the operation, with the media type it was sent as. */
  function expectDocumented(method: string, path: string, res: Answer): Response {
    const documented = operation(method, path).responses[String(res.status)];
    expect(documented, `${method.toUpperCase()} ${path} documents ${res.status}`).toBeDefined();
    const mediaType = String(res.headers['content-type']).split(';')[0];
    expect(Object.keys(documented.content ?? {}), `${method.toUpperCase()} ${path} ${res.status} documents ${mediaType}`).toContain(mediaType);
    return documented;
  }

  it('POST /v1/runs documents its 201 (the run) and its 403 as problem+json', async () => {
    const created = await h.t.http.post('/v1/runs').set(bearer(o.agentKey)).send({ specialistId: 'support' });
    expect(created.status).toBe(201);
    const doc201 = expectDocumented('post', '/v1/runs', created);
    const required = doc201.content?.['application/json']?.schema?.required ?? [];
    for (const field of Object.keys(created.body as object)) expect(required, `201 schema names ${field}`).toContain(field);

    const platform = await h.t.http.post('/v1/runs').set(adminAuth).send({ specialistId: 'support' });
    expect(platform.status).toBe(403);
    expectDocumented('post', '/v1/runs', platform);
  });

  it('documents the 409s: duplicate org id, approval digest mismatch and already decided, reconciling a settled call', async () => {
    const id = randomUUID();
    expect((await h.t.http.post('/v1/orgs').set(adminAuth).send({ name: 'first', id })).status).toBe(201);
    const dup = await h.t.http.post('/v1/orgs').set(adminAuth).send({ name: 'second', id });
    expect([dup.status, dup.body.code]).toEqual([409, 'CONFLICT']);
    expect(expectDocumented('post', '/v1/orgs', dup).description).toContain('CONFLICT');

    const expert = await createKey(h.t, o.orgId, 'expert');
    const waiting = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(refundUse('1.00'));
    expect(waiting.status).toBe(202);
    const approval = await approvalFor(h, expert.key, waiting.body.toolCallId as string);
    const decide = (actionDigest: string) =>
      h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'reject', actionDigest });
    const mismatch = await decide('0'.repeat(64));
    expect([mismatch.status, mismatch.body.code]).toEqual([409, 'ACTION_DIGEST_MISMATCH']);
    const decision409 = expectDocumented('post', '/v1/approvals/{id}/decision', mismatch);
    expect((await decide(approval.actionDigest)).status).toBe(200);
    expectDocumented('post', '/v1/approvals/{id}/decision', await decide(approval.actionDigest)); // the success stays documented
    const again = await decide(approval.actionDigest);
    expect([again.status, again.body.code]).toEqual([409, 'APPROVAL_ALREADY_DECIDED']);
    expectDocumented('post', '/v1/approvals/{id}/decision', again);
    expect(decision409.description).toContain('ACTION_DIGEST_MISMATCH');
    expect(decision409.description).toContain('APPROVAL_ALREADY_DECIDED');

    const done = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(done.body.status).toBe('succeeded');
    const rec = await h.t.http.post(`/v1/tool-calls/${done.body.toolCallId}/reconcile`).set(bearer(ops)).send({ status: 'failed', note: 'checked' });
    expect([rec.status, rec.body.code]).toEqual([409, 'NOT_RECONCILABLE']);
    expect(expectDocumented('post', '/v1/tool-calls/{id}/reconcile', rec).description).toContain('NOT_RECONCILABLE');
    expect(Object.keys(operation('post', '/v1/tool-calls/{id}/reconcile').responses)).toContain('200');
  });

  it('the tool-call and batch routes document problem+json where they send it, and both media types for 403/422', async () => {
    const A = bearer(o.agentKey);
    const path = '/v1/runs/{runId}/tool-calls';
    const noRun = await h.t.http.post(`/v1/runs/${randomUUID()}/tool-calls`).set(A).send(toolUse('order_lookup', { action: 'lookup', orderId: '1' }));
    expect([noRun.status, noRun.body.code]).toEqual([404, 'RUN_NOT_FOUND']);
    expectDocumented('post', path, noRun);
    const notJson = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(A).send({ hello: 'world' });
    expect(notJson.status).toBe(400);
    expectDocumented('post', path, notJson);

    // 403: the tool-call body when the call reached the ledger, problem+json for a wrong role.
    const blocked = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(A).send(toolUse('shopify_order', { action: 'add_note', orderId: '1', note: 'x' }));
    expect([blocked.status, blocked.body.errorCode]).toEqual([403, 'NOT_IN_MANIFEST']);
    expectDocumented('post', path, blocked);
    const wrongRole = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(ops)).send(toolUse('order_lookup', { action: 'lookup', orderId: '1' }));
    expect([wrongRole.status, wrongRole.body.code]).toEqual([403, 'FORBIDDEN']);
    expectDocumented('post', path, wrongRole);

    // 422: INVALID_INPUT is the tool-call body, IDEMPOTENCY_KEY_REUSED problem+json.
    const invalid = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(A).send(toolUse('order_lookup', { action: 'lookup' }));
    expect([invalid.status, invalid.body.errorCode]).toEqual([422, 'INVALID_INPUT']);
    expectDocumented('post', path, invalid);
    const key = `contract-${randomUUID()}`;
    const first = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(A).set('Idempotency-Key', key).send(toolUse('order_lookup', { action: 'lookup', orderId: '1' }));
    expect(first.status).toBe(200);
    const reused = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(A).set('Idempotency-Key', key).send(toolUse('order_lookup', { action: 'lookup', orderId: '2' }));
    expect([reused.status, reused.body.code]).toEqual([422, 'IDEMPOTENCY_KEY_REUSED']);
    expectDocumented('post', path, reused);

    const batchNoRun = await h.t.http.post(`/v1/runs/${randomUUID()}/tool-calls:batch`).set(A).send({ toolUses: [toolUse('order_lookup', { action: 'lookup', orderId: '1' })] });
    expect(batchNoRun.status).toBe(404);
    expectDocumented('post', '/v1/runs/{runId}/tool-calls:batch', batchNoRun);
    const batchEmpty = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls:batch`).set(A).send({ toolUses: [] });
    expect(batchEmpty.status).toBe(400);
    expectDocumented('post', '/v1/runs/{runId}/tool-calls:batch', batchEmpty);
  });

  it('listings with an orgId filter document the 404 an org key gets for another org', async () => {
    const other = (await h.t.http.post('/v1/orgs').set(adminAuth).send({ name: 'other' })).body.id as string;
    const orgAdmin = bearer(o.adminKey);
    const listings = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([, op]) => (op.parameters ?? []).some((x) => x.in === 'query' && x.name === 'orgId'))
        .map(([method]) => ({ path, method })),
    );
    expect(listings.map((l) => l.path)).toEqual(expect.arrayContaining(['/v1/tool-calls', '/v1/ledger/events', '/v1/ledger/verify', '/v1/approvals', '/v1/api-keys']));
    for (const { path, method } of listings) {
      expect(method).toBe('get');
      const extra = path === '/v1/tool-calls/export' ? '&format=ndjson' : ''; // its one required parameter
      const res = await h.t.http.get(`${path}?orgId=${other}${extra}`).set(path === '/v1/api-keys' ? orgAdmin : bearer(ops));
      expect([res.status, res.body.code], path).toEqual([404, 'NOT_FOUND']);
      expectDocumented('get', path, res);
    }
  });

  it.each(['policies', 'tool-permissions'])('a conditional GET of …/%s answers 304 with its ETag and no body, as the document says (a docs reviewer: undocumented)', async (what) => {
    const path = `/v1/orgs/${o.orgId}/${what}`;
    const first = await h.t.http.get(path).set(adminAuth);
    expect(first.status).toBe(200);
    const again = await h.t.http.get(path).set(adminAuth).set('If-None-Match', String(first.headers.etag));
    expect(again.status).toBe(304);
    expect(again.headers.etag).toBe(first.headers.etag);
    expect(operation('get', `/v1/orgs/{orgId}/${what}`).responses['304']?.headers).toHaveProperty('ETag');
  });

  it.each(['policies', 'tool-permissions'])('…/%s: GET and PUT document the If-None-Match they evaluate, and the PUT’s 412 the ETag it carries (an OpenAPI reviewer: undocumented)', async (what) => {
    const path = `/v1/orgs/${o.orgId}/${what}`;
    const template = `/v1/orgs/{orgId}/${what}`;
    const body = what === 'policies' ? { rules: [] } : { items: [] };
    const current = await h.t.http.get(path).set(adminAuth);
    expect(current.headers.etag).toMatch(/^".+"$/);
    // If-None-Match naming the current tag: 304 on GET, 412 on PUT; a stale If-Match: 412. Each 412 carries the current ETag.
    const notModified = await h.t.http.get(path).set(adminAuth).set('If-None-Match', String(current.headers.etag));
    const unchanged = await h.t.http.put(path).set(bearer(o.adminKey)).set('If-None-Match', String(current.headers.etag)).send(body);
    const stale = await h.t.http.put(path).set(bearer(o.adminKey)).set('If-Match', '"stale"').send(body);
    expect([notModified.status, unchanged.status, unchanged.headers.etag, stale.status, stale.headers.etag]).toEqual([304, 412, current.headers.etag, 412, current.headers.etag]);
    for (const res of [unchanged, stale]) expect(Object.keys(expectDocumented('put', template, res).headers ?? {})).toContain('ETag');
    const headerParams = (method: string) => (operation(method, template).parameters ?? []).filter((x) => x.in === 'header').map((x) => x.name);
    expect(headerParams('get')).toContain('If-None-Match');
    expect(headerParams('put')).toEqual(expect.arrayContaining(['If-Match', 'If-None-Match']));
  });

  it('every 401 documents WWW-Authenticate, as sent; the export’s 200 documents the Content-Disposition it sends (an OpenAPI reviewer: undocumented)', async () => {
    const silent = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([, op]) => op.responses['401']?.headers?.['WWW-Authenticate'] === undefined)
        .map(([method]) => `${method.toUpperCase()} ${path}`),
    );
    expect(silent).toEqual([]);
    const anonymous = await h.t.http.get('/v1/tools');
    expect([anonymous.status, anonymous.headers['www-authenticate']]).toEqual([401, 'Bearer realm="tool-gateway"']);
    expect(expectDocumented('get', '/v1/tools', anonymous).headers?.['WWW-Authenticate']).toMatchObject({ schema: { example: 'Bearer realm="tool-gateway"' } });

    const declared = operation('get', '/v1/tool-calls/export').responses['200'].headers?.['Content-Disposition'] as { schema: { enum: string[] } } | undefined;
    const sent: string[] = [];
    for (const format of ['ndjson', 'csv']) {
      const res = await h.t.http.get(`/v1/tool-calls/export?format=${format}`).set(bearer(ops));
      expectDocumented('get', '/v1/tool-calls/export', res);
      sent.push(String(res.headers['content-disposition']));
    }
    expect(sent).toEqual(['attachment; filename="tool-calls.ndjson"', 'attachment; filename="tool-calls.csv"']);
    expect(declared?.schema.enum).toEqual(sent);
  });

  it('every operation documents 500 INTERNAL, the answer to an unexpected error (a docs reviewer: named nowhere in the document)', () => {
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        if (path.startsWith('/v1/')) expect(op.responses['500']?.description, `${method.toUpperCase()} ${path}`).toMatch(/^INTERNAL/);
      }
    }
  });

  it('a known path with a wrong method answers 404 NOT_FOUND "no such route", and the document says so (no 405)', async () => {
    for (const res of [await h.t.http.delete('/v1/tools').set(adminAuth), await h.t.http.put('/v1/runs').set(bearer(o.agentKey)).send({}), await h.t.http.patch(`/v1/approvals/${randomUUID()}`).set(adminAuth).send({})]) {
      expect([res.status, res.body.code, res.body.detail]).toEqual([404, 'NOT_FOUND', 'no such route']);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    }
    expect(doc.info.description).toMatch(/method it does not support.*404 NOT_FOUND.*"no such route".*no 405/);
    expect(operation('get', '/v1/approvals/{id}').responses['404'].description).toContain('no such route');
  });
  it('every operation documents the refusals any route answers: 400 for an unknown query parameter (VALIDATION_FAILED) or a malformed request (BAD_REQUEST), 408, 417 and 431', async () => {
    let operations = 0;
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        operations++;
        const documented = op.responses['400']?.description ?? '';
        expect(documented, `${method.toUpperCase()} ${path}`).toContain('VALIDATION_FAILED for a query parameter the route does not take');
        expect(documented, `${method.toUpperCase()} ${path}`).toContain('BAD_REQUEST for a malformed request');
        // Answered by the HTTP layer before any route (http-edges.spec.ts, slow-uploads.spec.ts): documented everywhere too.
        expect(op.responses['408']?.description, `${method.toUpperCase()} ${path}`).toMatch(/^BAD_REQUEST: .*HTTP_REQUEST_TIMEOUT_MS/);
        expect(op.responses['417']?.description, `${method.toUpperCase()} ${path}`).toMatch(/^BAD_REQUEST: an Expect header/);
        expect(op.responses['431']?.description, `${method.toUpperCase()} ${path}`).toMatch(/^PAYLOAD_TOO_LARGE: the request headers/);
      }
    }
    expect(operations).toBeGreaterThan(30);
    // Live: a tool call with a query parameter (its own 400 otherwise names only BAD_REQUEST), the catalog with two keys.
    const dryRun = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls?dryRun=true`).set(bearer(o.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '1' }));
    expect([dryRun.status, dryRun.body.code, dryRun.body.detail]).toEqual([400, 'VALIDATION_FAILED', 'dryRun: property dryRun should not exist']);
    expectDocumented('post', '/v1/runs/{runId}/tool-calls', dryRun);
    const port = ((h.t.app.getHttpServer() as Server).address() as AddressInfo).port;
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1');
      let text = '';
      socket.on('data', (c: Buffer) => (text += c.toString('utf8')));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
      socket.write(`GET /v1/tools HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${o.agentKey}\r\nAuthorization: Bearer ${o.agentKey}\r\nConnection: close\r\n\r\n`);
    });
    const [head, body] = raw.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 .*content-type: application\/problem\+json/is);
    expect(JSON.parse(body) as { code: string }).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
  });

  it('POST /v1/api-keys documents the 404 of an unknown org or (org admins) another org, and the 403 of an org admin asking for a platform key', async () => {
    const unknown = await postApiKey(h.t.http, adminAuth, { orgId: randomUUID(), role: 'agent', name: 'x' });
    expect([unknown.status, unknown.body.code]).toEqual([404, 'NOT_FOUND']);
    expect(expectDocumented('post', '/v1/api-keys', unknown).description).toContain('unknown org');
    const other = (await h.t.http.post('/v1/orgs').set(adminAuth).send({ name: 'other' })).body.id as string;
    const foreign = await postApiKey(h.t.http, bearer(o.adminKey), { orgId: other, role: 'agent', name: 'x' });
    expect([foreign.status, foreign.body.code]).toEqual([404, 'NOT_FOUND']);
    expectDocumented('post', '/v1/api-keys', foreign);
    const platform = await postApiKey(h.t.http, bearer(o.adminKey), { orgId: null, role: 'ops', name: 'x' });
    expect([platform.status, platform.body.code]).toEqual([403, 'FORBIDDEN']);
    expect(expectDocumented('post', '/v1/api-keys', platform).description).toContain('platform key');
  });

  it('documents the headers: X-Correlation-Id on every answer, Retry-After on every 429 and 503, Idempotent-Replayed on a tool call’s replay', async () => {
    const missing = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item).flatMap(([method, op]) =>
        Object.entries(op.responses)
          .filter(([status, res]) => res.headers?.['X-Correlation-Id'] === undefined || (['429', '503'].includes(status) && res.headers['Retry-After'] === undefined))
          .map(([status]) => `${method.toUpperCase()} ${path} ${status}`),
      ),
    );
    expect(missing).toEqual([]);

    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const first = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).set('X-Correlation-Id', 'contract-headers').send(use);
    expect([first.status, first.headers['x-correlation-id'], first.headers['idempotent-replayed']]).toEqual([200, 'contract-headers', undefined]);
    const replay = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(use);
    expect([replay.status, replay.headers['idempotent-replayed']]).toEqual([200, 'true']);
    expect(Object.keys(expectDocumented('post', '/v1/runs/{runId}/tool-calls', replay).headers ?? {})).toEqual(expect.arrayContaining(['X-Correlation-Id', 'Idempotent-Replayed']));
  });
});

describe('OpenAPI: a stopping gateway', () => {
  it('answers 503 GATEWAY_STOPPING with Retry-After, as every operation documents', async () => {
    const t = await startTestApp();
    try {
      const doc = (await t.http.get('/openapi.json')).body as Doc;
      // On a connection open when the drain began (a new one is refused then), its body still coming.
      const res = await requestDuringDrain(t.app.getHttpServer() as Server, () => beginHttpDrain(t.app), {
        method: 'POST',
        path: '/v1/orgs',
        headers: { Authorization: adminAuth.Authorization },
        body: JSON.stringify({ name: 'never created' }),
      });
      expect([res.status, (JSON.parse(res.body) as { code: string }).code, /\r\nRetry-After: (\S+)/i.exec(res.head)?.[1]]).toEqual([503, 'GATEWAY_STOPPING', '1']);
      const silent = Object.entries(doc.paths).flatMap(([path, item]) =>
        Object.entries(item)
          .filter(([, op]) => !op.responses['503']?.description.includes('GATEWAY_STOPPING') || op.responses['503'].headers?.['Retry-After'] === undefined)
          .map(([method]) => `${method.toUpperCase()} ${path}`),
      );
      expect(silent).toEqual([]);
    } finally {
      await t.close();
    }
  });
});
