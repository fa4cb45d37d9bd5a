/**
 * Query strings are judged the same way on every route: an unknown parameter
 * is 400 VALIDATION_FAILED, and a cursor is validated whatever the filters.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';

describe('query validation', () => {
  let h: Harness;
  let o: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    o = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('the GET routes that take no parameters refuse one (as GET /v1/tools does): a client that thinks they page is told', async () => {
    const admin = bearer(o.adminKey);
    const absent = '00000000-0000-4000-8000-000000000001';
    const routes: [string, number][] = [
      [`/v1/orgs/${o.orgId}`, 200],
      [`/v1/orgs/${o.orgId}/feature-flags`, 200],
      [`/v1/orgs/${o.orgId}/tool-permissions`, 200],
      [`/v1/orgs/${o.orgId}/policies`, 200],
      [`/v1/orgs/${o.orgId}/integrations`, 200],
      [`/v1/runs/${o.runId}`, 200],
      [`/v1/approvals/${absent}`, 404],
      [`/v1/tool-calls/${absent}`, 404],
    ];
    for (const [url, status] of routes) {
      expect((await h.t.http.get(url).set(admin)).status, url).toBe(status);
      const paged = await h.t.http.get(`${url}?limit=1&cursor=x`).set(admin);
      expect([paged.status, paged.body.code, paged.body.detail], url).toEqual([400, 'VALIDATION_FAILED', 'limit: property limit should not exist; cursor: property cursor should not exist']);
    }
  });

  it('write routes refuse a query parameter before doing anything: DELETE credentials?dryRun=true deletes nothing, complete?dryRun=true ends nothing', async () => {
    const admin = bearer(o.adminKey);
    const refused = [400, 'VALIDATION_FAILED', 'dryRun: property dryRun should not exist'];
    const del = await h.t.http.delete(`/v1/orgs/${o.orgId}/integrations/shopify/credentials?dryRun=true`).set(admin);
    expect([del.status, del.body.code, del.body.detail]).toEqual(refused);
    const listed = await h.t.http.get(`/v1/orgs/${o.orgId}/integrations`).set(admin);
    expect(JSON.stringify(listed.body)).toContain('shopify');
    const complete = await h.t.http.post(`/v1/runs/${o.runId}/complete?dryRun=true`).set(bearer(o.agentKey)).send({});
    expect([complete.status, complete.body.code, complete.body.detail]).toEqual(refused);
    const call = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls?dryRun=true`).set(bearer(o.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect([call.status, call.body.code, call.body.detail]).toEqual(refused);
    expect(await h.t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1', [o.runId])).toEqual([{ n: 0 }]);
    expect((await h.t.http.get(`/v1/runs/${o.runId}`).set(admin)).body.status).toBe('running');
    // The same requests without it are carried out.
    expect((await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }))).status).toBe(200);
  });

  it('GET /v1/approvals: an agent asking for kind=expert gets its cursor validated too (400), and an empty page with a good one', async () => {
    const A = bearer(o.agentKey);
    for (const url of ['/v1/approvals?cursor=garbage', '/v1/approvals?kind=expert&cursor=garbage', '/v1/approvals?kind=client&cursor=garbage']) {
      const res = await h.t.http.get(url).set(A);
      expect([res.status, res.body.code], url).toEqual([400, 'VALIDATION_FAILED']);
      expect(res.body.detail, url).toMatch(/^cursor:/);
    }
    const plain = await h.t.http.get('/v1/approvals?kind=expert').set(A);
    expect([plain.status, plain.body]).toEqual([200, { items: [], nextCursor: null }]);
  });

  it('GET /v1/tool-calls/{id}/result refuses an unknown parameter (a waitMs typo) and still judges waitMs itself', async () => {
    const A = bearer(o.agentKey);
    const call = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(A).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(call.status).toBe(200);
    const url = `/v1/tool-calls/${call.body.toolCallId}/result`;
    const typo = await h.t.http.get(`${url}?waitms=5000`).set(A);
    expect([typo.status, typo.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    expect(typo.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(typo.body.detail).toBe('waitms: property waitms should not exist');
    for (const bad of ['-1', '30001', '1e3', 'abc']) {
      const res = await h.t.http.get(`${url}?waitMs=${bad}`).set(A);
      expect([res.status, res.body.code, res.body.detail], bad).toEqual([400, 'VALIDATION_FAILED', 'waitMs: an integer from 0 to 30000']);
    }
    const twice = await h.t.http.get(`${url}?waitMs=1&waitMs=2`).set(A);
    expect([twice.status, twice.body.detail]).toEqual([400, 'waitMs: give it once (it was sent 2 times)']);
    for (const ok of ['', '?waitMs=0', '?waitMs=10']) {
      const res = await h.t.http.get(`${url}${ok}`).set(A);
      expect([res.status, res.body.status], ok).toEqual([200, 'succeeded']);
    }
  });

  it('GET /v1/tools refuses unknown parameters like the routes with a query DTO', async () => {
    const plain = await h.t.http.get('/v1/tools').set(bearer(o.agentKey));
    expect(plain.status).toBe(200);
    expect(plain.body.items.length).toBeGreaterThan(0);
    const res = await h.t.http.get('/v1/tools?vendor=shopify&limit=1').set(adminAuth);
    expect([res.status, res.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body.detail).toBe('vendor: property vendor should not exist; limit: property limit should not exist');
    expect(res.body.errors).toEqual(['vendor: property vendor should not exist', 'limit: property limit should not exist']);
    // The same shape as a query DTO's answer.
    const dto = await h.t.http.get(`/v1/runs/${o.runId}/tools?vendor=shopify`).set(bearer(o.agentKey));
    expect([dto.status, dto.body.detail, dto.body.errors]).toEqual([400, 'vendor: property vendor should not exist', ['vendor: property vendor should not exist']]);
  });

  it('a parameter sent twice is told so (not every rule refusing the list at once), and a bracketed key is named a query parameter', async () => {
    const ops = bearer((await createKey(h.t, o.orgId, 'ops')).key);
    for (const url of ['/v1/tool-calls?limit=1&limit=2', '/v1/ledger/events?limit=5&limit=5', '/v1/approvals?status=pending&status=approved']) {
      const res = await h.t.http.get(url).set(url.includes('approvals') ? bearer(o.agentKey) : ops);
      const name = /\?(\w+)=/.exec(url)![1];
      expect([res.status, res.body.code, res.body.detail], url).toEqual([400, 'VALIDATION_FAILED', `${name}: give it once (it was sent 2 times)`]);
      expect(res.body.errors).toEqual([res.body.detail]);
    }
    for (const url of ['/v1/tool-calls?status[]=succeeded', '/v1/ledger/events?type[]=x', `/v1/runs/${o.runId}/tools?format[]=anthropic`]) {
      const res = await h.t.http.get(url).set(url.includes('/runs/') ? bearer(o.agentKey) : ops);
      expect([res.status, res.body.code], url).toEqual([400, 'VALIDATION_FAILED']);
      expect(res.body.detail, url).toMatch(/^query: /);
      expect(res.body.detail, url).not.toContain('[]');
    }
    // A parameter really named body keeps its name, as on GET /v1/tools (its own check).
    for (const url of ['/v1/tool-calls?body=x', '/v1/tools?body=x']) {
      const res = await h.t.http.get(url).set(ops);
      expect([res.status, res.body.detail], url).toEqual([400, 'body: property body should not exist']);
    }
    // A body's unnamed field is still "body".
    const body = await h.t.http.post('/v1/orgs').set(adminAuth).send({ name: 'x', 'tgw_not a field': 1 });
    expect([body.status, body.body.detail]).toEqual([400, expect.stringMatching(/^body: /)]);
  });

  it('the OpenAPI document lists the parameters these routes accept', async () => {
    const doc = (await h.t.http.get('/openapi.json')).body as { paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>> };
    const names = (path: string) => (doc.paths[path].get.parameters ?? []).filter((x) => x.in === 'query').map((x) => x.name);
    expect(names('/v1/tool-calls/{id}/result')).toEqual(['waitMs']);
    expect(names('/v1/tools')).toEqual([]);
  });
});
