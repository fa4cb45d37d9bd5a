/**
 * Consistency across the API surface, as a client library's author checks it: every VALIDATION_FAILED has the
 * `errors` array the Problem schema documents, and every write that answers 412 to a precondition documents it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';

let h: Harness;
let o: OrgSetup;
beforeAll(async () => {
  h = await startHarness();
  o = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
}, 90_000);
afterAll(async () => {
  await h?.close();
});

describe('consistency', () => {
  it('every 400 VALIDATION_FAILED carries the `errors` array the Problem schema documents, on every route', async () => {
    const t = h.t;
    const ag = bearer(o.agentKey);
    const unknownCall = '5b0c3c5e-8f0b-4d6f-9a55-2d2f2f2f2f2f';
    const doc = (await t.http.get('/openapi.json')).body;
    // The served document promises it for this code.
    expect(doc.components.schemas.Problem.properties.errors.description).toMatch(/^VALIDATION_FAILED: one message per problem/);
    const cases: [label: string, send: () => Promise<{ status: number; body: Record<string, unknown> }>][] = [
      // those whose check lists its problems
      ['limit=0', () => t.http.get('/v1/tool-calls?limit=0').set(adminAuth)],
      ['POST /v1/orgs name: 5', () => t.http.post('/v1/orgs').set(adminAuth).send({ name: 5 })],
      // those whose check finds one (errors: [detail])
      ['cursor=zzz', () => t.http.get('/v1/tool-calls?cursor=zzz').set(adminAuth)],
      ['since=garbage', () => t.http.get('/v1/tool-calls?since=garbage').set(adminAuth)],
      ['usage from=garbage', () => t.http.get(`/v1/orgs/${o.orgId}/usage?from=garbage`).set(adminAuth)],
      ['approvals runId=nope', () => t.http.get('/v1/approvals?runId=nope').set(adminAuth)],
      ['result waitMs=-1', () => t.http.get(`/v1/tool-calls/${unknownCall}/result?waitMs=-1`).set(ag)],
      ['credentials bad config', () => t.http.put(`/v1/orgs/${o.orgId}/integrations/shopify/credentials`).set(adminAuth).send({ config: { shopDomain: 'nope' } })],
      ['batch of 0', () => t.http.post(`/v1/runs/${o.runId}/tool-calls:batch`).set(ag).send({ toolUses: [] })],
      ['run metadata too big', () => t.http.post('/v1/runs').set(ag).send({ specialistId: 's', metadata: { a: 'x'.repeat(40_000) } })],
      ['platform agent key', () => t.http.post('/v1/api-keys').set(adminAuth).send({ orgId: null, role: 'agent', name: 'x' })],
      ['verify without orgId', () => t.http.get('/v1/ledger/verify').set(adminAuth)],
    ];
    const seen: string[] = [];
    for (const [label, send] of cases) {
      const r = await send();
      expect([label, r.status, r.body.code]).toEqual([label, 400, 'VALIDATION_FAILED']);
      if (!Array.isArray(r.body.errors) || r.body.errors.length === 0) seen.push(`${label}: no errors[] (detail "${String(r.body.detail)}")`);
    }
    expect(seen).toEqual([]);
  });

  it('the OpenAPI document lists the 412 PRECONDITION_FAILED every write answers to If-Match / If-None-Match: *', async () => {
    const t = h.t;
    const ag = bearer(o.agentKey);
    await t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(ag).send(toolUse('shopify_refund', { action: 'create', orderId: '1001', amount: '500' }));
    const approval = (await t.http.get('/v1/approvals').set(adminAuth).query({ orgId: o.orgId })).body.items[0];
    const call = (await t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(ag).send(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }))).body;
    const key = await createKey(t, o.orgId, 'ops');
    const doc = (await t.http.get('/openapi.json')).body as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
    const values: Record<string, string> = { runId: o.runId, orgId: o.orgId, flag: 'tool_calling_enabled', type: 'jumio' };
    const undocumented: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        if (method === 'get') continue;
        const id = path.startsWith('/v1/approvals') ? approval.id : path.startsWith('/v1/api-keys') ? key.id : call.toolCallId;
        const url = path.replace(/\{(\w+)\}/g, (_, n: string) => values[n] ?? id);
        const auth = path.startsWith('/v1/runs') ? ag : adminAuth;
        const res = await (t.http as unknown as Record<string, (u: string) => import('supertest').Test>)[method](url).set(auth).set('If-Match', '"v1"').send(method === 'delete' ? undefined : {});
        if (res.status === 412 && op.responses['412'] === undefined) undocumented.push(`${method.toUpperCase()} ${path}`);
      }
    }
    expect(undocumented).toEqual([]);
  });
});
