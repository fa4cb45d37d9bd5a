import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postApiKey } from '../support/api-keys.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * A 400 names a misspelt field (the fix is obvious then) but never echoes an unknown key that does not look like
 * a field name: an admin who pastes a token where a key belongs would find it repeated in the problem body, and in
 * whatever logs it downstream. Every typed body and query (the global validation pipe) and the policy body.
 */
describe('unknown fields: which names a 400 echoes', () => {
  let t: TestApp;
  let org: string;
  let admin: string;
  const TOKENS = ['shpat_0123456789abcdef0123456789abcdef', 'sk_live_4eC39HqLyjWDarjtT1zdp7dc', 'tgw_0123456789abcdefghijklmnopqrstuv', 'Bearer abc.def'];

  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Echo Co');
    admin = (await createKey(t, org, 'admin')).key;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a typed body (POST /v1/api-keys) names a misspelt field, and never a token pasted as a key', async () => {
    const typo = await postApiKey(t.http, adminAuth, { orgId: org, role: 'ops', name: 'x', nmae: 'y' });
    expect([typo.status, typo.body.detail]).toEqual([400, 'nmae: property nmae should not exist']);
    for (const token of TOKENS) {
      const res = await postApiKey(t.http, adminAuth, { orgId: org, role: 'ops', name: 'x', [token]: true });
      expect([res.status, res.body.code], token).toEqual([400, 'VALIDATION_FAILED']);
      expect(res.text, token).not.toContain(token.slice(0, 10));
      expect(res.body.detail).toBe('body: an unknown field, not named as it does not look like a field name, should not exist');
    }
  });

  it('a tool_use body and a batch body name a misspelt top-level key, and never a token pasted as one', async () => {
    const agent = (await createKey(t, org, 'agent')).key;
    const run = await t.http.post('/v1/runs').set(bearer(agent)).send({ specialistId: 'echo' });
    expect(run.status).toBe(201);
    const use = { type: 'tool_use', id: 'toolu_echo', name: 'order_lookup', input: { action: 'lookup', orderId: '1' } };
    const typo = await t.http.post(`/v1/runs/${run.body.id}/tool-calls`).set(bearer(agent)).send({ ...use, nmae: 'x' });
    expect([typo.status, typo.body.detail]).toEqual([400, 'unknown field in tool_use: nmae']);
    // An OpenAI tool call posted as it came is told the shape to post instead.
    const hint = ' (an OpenAI tool call? post it as {"type":"tool_use","id":<its id or call_id>,"name":<its name>,"input":<its arguments, parsed>})';
    const chat = { id: 'call_0', type: 'function', function: { name: 'order_lookup', arguments: '{"action":"lookup","orderId":"1"}' } };
    const responses = { type: 'function_call', call_id: 'call_0', name: 'order_lookup', arguments: '{"action":"lookup","orderId":"1"}' };
    for (const [shape, field] of [[chat, 'function'], [responses, 'call_id']] as const) {
      const res = await t.http.post(`/v1/runs/${run.body.id}/tool-calls`).set(bearer(agent)).send(shape);
      expect([res.status, res.body.detail]).toEqual([400, `unknown field in tool_use: ${field}${hint}`]);
    }
    const batchTypo = await t.http.post(`/v1/runs/${run.body.id}/tool-calls:batch`).set(bearer(agent)).send({ toolUses: [use], tooluses: [] });
    expect([batchTypo.status, batchTypo.body.detail]).toEqual([400, 'unknown field: tooluses']);
    for (const token of TOKENS) {
      const single = await t.http.post(`/v1/runs/${run.body.id}/tool-calls`).set(bearer(agent)).send({ ...use, [token]: 1 });
      expect([single.status, single.body.code], token).toEqual([400, 'BAD_REQUEST']);
      expect(single.text, token).not.toContain(token.slice(0, 10));
      const batch = await t.http.post(`/v1/runs/${run.body.id}/tool-calls:batch`).set(bearer(agent)).send({ toolUses: [use], [token]: 1 });
      expect([batch.status, batch.body.code], token).toEqual([400, 'VALIDATION_FAILED']);
      expect(batch.text, token).not.toContain(token.slice(0, 10));
      // An item of a batch is answered as a single tool_use is.
      const item = await t.http.post(`/v1/runs/${run.body.id}/tool-calls:batch`).set(bearer(agent)).send({ toolUses: [{ ...use, id: `toolu_${token.length}`, [token]: 1 }] });
      expect(item.status, token).toBe(200);
      expect(item.text, token).not.toContain(token.slice(0, 10));
    }
  });

  it('a query names a misspelt parameter, and never a token pasted as one', async () => {
    const ops = (await createKey(t, org, 'ops')).key;
    for (const token of TOKENS) {
      const res = await t.http.get('/v1/tool-calls').query({ [token]: '1' }).set(bearer(ops));
      expect([res.status, res.body.code], token).toEqual([400, 'VALIDATION_FAILED']);
      expect(res.text, token).not.toContain(token.slice(0, 10));
    }
  });

  it('GET /v1/tools (no query parameters) names a misspelt parameter, and never a token pasted as one', async () => {
    const ops = (await createKey(t, org, 'ops')).key;
    const typo = await t.http.get('/v1/tools').query({ limt: '1' }).set(bearer(ops));
    expect([typo.status, typo.body.detail, typo.body.errors]).toEqual([400, 'limt: property limt should not exist', ['limt: property limt should not exist']]);
    for (const token of TOKENS) {
      const res = await t.http.get('/v1/tools').query({ [token]: '1' }).set(bearer(ops));
      expect([res.status, res.body.code], token).toEqual([400, 'VALIDATION_FAILED']);
      expect(JSON.stringify(res.body), token).not.toContain(token.slice(0, 10));
      // The same words as every other typed query (the global validation pipe): GET /v1/runs/:id/tools.
      const other = await t.http.get('/v1/runs/00000000-0000-4000-8000-000000000000/tools').query({ [token]: '1' }).set(bearer(ops));
      expect([res.body.detail, res.body.errors], token).toEqual([other.body.detail, other.body.errors]);
      expect(res.body.detail).toBe('query: an unknown field, not named as it does not look like a field name, should not exist');
    }
  });

  it('a "constructor" key deep in free-form JSON (a run\'s metadata) is refused where it is, never naming a token on its path', async () => {
    const plain = await t.http.post('/v1/runs').set(bearer(admin)).send({ specialistId: 's', metadata: { order: { constructor: 1 } } });
    expect([plain.status, plain.body.code, plain.body.detail]).toEqual([400, 'VALIDATION_FAILED', 'metadata.order.constructor: keys named "constructor", "prototype" or "__proto__" are not accepted']);
    for (const token of TOKENS) {
      const res = await t.http.post('/v1/runs').set(bearer(admin)).send({ specialistId: 's', metadata: { [token]: { constructor: 1 }, list: [{ [token]: { prototype: 1 } }] } });
      expect([res.status, res.body.code], token).toEqual([400, 'VALIDATION_FAILED']);
      expect(JSON.stringify(res.body), token).not.toContain(token.slice(0, 10));
      expect([res.body.detail, res.body.errors], token).toEqual([
        'metadata.<a key>.constructor: keys named "constructor", "prototype" or "__proto__" are not accepted',
        ['metadata.<a key>.constructor: keys named "constructor", "prototype" or "__proto__" are not accepted'],
      ]);
      const inList = await t.http.post('/v1/runs').set(bearer(admin)).send({ specialistId: 's', metadata: { list: [{ [token]: { prototype: 1 } }] } });
      expect([inList.status, inList.body.detail], token).toEqual([400, 'metadata.list[0].<a key>.prototype: keys named "constructor", "prototype" or "__proto__" are not accepted']);
      expect(JSON.stringify(inList.body), token).not.toContain(token.slice(0, 10));
    }
  });

  it('the policy body names a misspelt top-level field, and never a token pasted as one', async () => {
    const url = `/v1/orgs/${org}/policies`;
    const typo = await t.http.put(url).set(bearer(admin)).send({ rules: [], ruels: [] });
    expect([typo.status, typo.body.detail]).toEqual([400, 'ruels: property should not exist']);
    for (const token of TOKENS) {
      const res = await t.http.put(url).set(bearer(admin)).send({ rules: [], [token]: 1 });
      expect([res.status, res.body.code], token).toEqual([400, 'VALIDATION_FAILED']);
      expect(res.text, token).not.toContain(token.slice(0, 10));
    }
  });
});
