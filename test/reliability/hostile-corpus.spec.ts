import type { Response } from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HOSTILE_NANGO_PATHS } from '../../src/vendors/nango/nango-path.cases.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';
import { expectPrototypeClean, expectSane } from './hostile.support.js';
import { postToolUse } from './support.js';

/**
 * Named hostile inputs (the property tests in hostile-input.spec.ts cover the
 * random ones): each has a precise expected answer, and none may be a 5xx,
 * crash the app or touch Object.prototype.
 */
describe('hostile input: a corpus of named cases', () => {
  let h: Harness;
  let org: OrgSetup;
  let ops: string;
  let expert: string;
  const post = (body: unknown, headers: Record<string, string> = {}) => postToolUse(h.t.http, org.runId, org.agentKey, body, headers);
  const postRaw = (text: string, path = `/v1/runs/${org.runId}/tool-calls`) =>
    h.t.http.post(path).set({ ...bearer(org.agentKey), 'Content-Type': 'application/json' }).send(text);
  const lookup = (orderId = '12345') => toolUse('order_lookup', { action: 'lookup', orderId });

  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_order.add_note', 'nango_proxy.get', 'nango_proxy.post'], vendors: ['shopify', 'nango'] });
    ops = (await createKey(h.t, org.orgId, 'ops')).key;
    expert = (await createKey(h.t, org.orgId, 'expert')).key;
    // a few rows so listings and cursors have something to page through
    for (let i = 0; i < 3; i++) expect((await post(lookup())).status).toBe(200);
  }, 90_000);
  afterAll(async () => {
    await h?.close();
  });
  afterEach(async () => {
    expectPrototypeClean();
    expect((await h.t.http.get('/healthz')).status).toBe(200);
  });

  describe('bodies', () => {
    it('a body over 512 KiB on the tool-call route → 413; over 64 KiB on an admin route → 413', async () => {
      const big = JSON.stringify({ ...lookup(), input: { action: 'lookup', orderId: '1', pad: 'x'.repeat(520 * 1024) } });
      const res = await postRaw(big);
      expect(res.status).toBe(413);
      expect(res.body.code ?? JSON.parse(res.text).code).toBe('PAYLOAD_TOO_LARGE');
      const admin = await h.t.http.post('/v1/orgs').set({ ...adminAuth, 'Content-Type': 'application/json' }).send(JSON.stringify({ name: 'x'.repeat(70 * 1024) }));
      expect(admin.status).toBe(413);
    });

    it('nesting depth 40 → 400; depth 32 is parsed and judged on its merits', async () => {
      const nest = (depth: number) => `${'{"a":'.repeat(depth - 2)}1${'}'.repeat(depth - 2)}`;
      const deep = `{"type":"tool_use","id":"toolu_deep","name":"order_lookup","input":{"action":"lookup","orderId":"1","x":${nest(40)}}}`;
      const res = await postRaw(deep);
      expect(res.status).toBe(400);
      expect(JSON.parse(res.text).code).toBe('BAD_REQUEST');
      const ok = await postRaw(`{"type":"tool_use","id":"toolu_d32","name":"order_lookup","input":{"action":"lookup","orderId":"1","x":${nest(30)}}}`);
      expectSane(ok);
      expect(ok.status).toBe(422); // x is not a parameter of order_lookup.lookup
      const arrays = await postRaw(`${'['.repeat(5000)}${']'.repeat(5000)}`);
      expect(arrays.status).toBe(400);
    });

    it('huge arrays within the size limit: 100k elements as a param, as input, as the body', async () => {
      const arr = `[${Array.from({ length: 100_000 }, () => '0').join(',')}]`;
      const asParam = await postRaw(`{"type":"tool_use","id":"toolu_arr1","name":"order_lookup","input":{"action":"lookup","orderId":"1","items":${arr}}}`);
      expect(asParam.status).toBe(422);
      expect(asParam.body.errorCode).toBe('INVALID_INPUT');
      const asInput = await postRaw(`{"type":"tool_use","id":"toolu_arr2","name":"order_lookup","input":${arr}}`);
      expect(asInput.status).toBe(400);
      const asBody = await postRaw(arr);
      expect(asBody.status).toBe(400);
      const strings = await postRaw(`{"type":"tool_use","id":"toolu_arr3","name":"shopify_order","input":{"action":"add_note","orderId":"1001","note":${JSON.stringify('n'.repeat(400_000))}}}`);
      expectSane(strings);
      expect(strings.status).toBe(422);
    });

    it('__proto__, constructor and prototype keys in the body, the input and nested params', async () => {
      const cases = [
        '{"type":"tool_use","id":"toolu_p1","name":"order_lookup","input":{"action":"lookup","orderId":"12345"},"__proto__":{"polluted":1}}',
        '{"type":"tool_use","id":"toolu_p2","name":"order_lookup","input":{"action":"lookup","orderId":"12345","__proto__":{"polluted":1}}}',
        '{"type":"tool_use","id":"toolu_p3","name":"order_lookup","input":{"action":"lookup","orderId":"12345","constructor":{"prototype":{"polluted":1}}}}',
        '{"type":"tool_use","id":"toolu_p4","name":"order_lookup","input":{"__proto__":{"action":"lookup","orderId":"12345"}}}',
        '{"type":"tool_use","id":"toolu_p5","name":"nango_proxy","input":{"action":"get","path":"v1/x","query":{"__proto__":{"polluted":1},"constructor":"x","prototype":"y"}}}',
        '{"type":"tool_use","id":"toolu_p6","name":"nango_proxy","input":{"action":"post","path":"v1/x","body":{"__proto__":{"polluted":1},"a":{"constructor":{"prototype":{"polluted":1}}}}}}',
        '{"type":"tool_use","id":"toolu_p7","name":"__proto__","input":{"action":"constructor"}}',
        '{"type":"tool_use","id":"toolu_p8","name":"order_lookup","input":{"action":"__proto__","orderId":"12345"}}',
        '{"__proto__":{"type":"tool_use","id":"toolu_p9","name":"order_lookup","input":{"action":"lookup","orderId":"12345"}}}',
      ];
      for (const text of cases) {
        const res = await postRaw(text);
        expectSane(res, text);
        expectPrototypeClean();
      }
      const p2 = await postRaw(cases[1]);
      expect(p2.status).toBe(422); // __proto__ is not a parameter, and it is named as one
      const p9 = await postRaw(cases[8]);
      expect(p9.status).toBe(400); // the block's fields are not inherited from __proto__
      expect((await post(toolUse('__proto__', { action: 'lookup' }))).status).toBe(403);
      // Admin routes too.
      for (const [path, body] of [
        [`/v1/orgs/${org.orgId}/policies`, '{"rules":[{"id":"r","match":{"__proto__":{"toolName":"x"}},"decision":"allow"}],"__proto__":{"polluted":1}}'],
        [`/v1/orgs/${org.orgId}/tool-permissions`, '{"items":[{"__proto__":{"toolName":"order_lookup"},"action":"lookup","specialistId":null,"enabled":true}]}'],
        [`/v1/orgs/${org.orgId}/integrations/shopify/credentials`, '{"config":{"__proto__":{"accessToken":"x"},"shopDomain":"a.myshopify.com"}}'],
      ] as const) {
        const res = await h.t.http.put(path).set({ ...adminAuth, 'Content-Type': 'application/json' }).send(body);
        expectSane(res, path);
        expect(res.status).toBe(400);
      }
      // class-transformer drops a __proto__ key instead of copying it: accepted or refused, never applied.
      const orgRes = await h.t.http.post('/v1/orgs').set({ ...adminAuth, 'Content-Type': 'application/json' }).send('{"name":"proto org","__proto__":{"polluted":1}}');
      expectSane(orgRes);
      expect([201, 400]).toContain(orgRes.status);
      if (orgRes.status === 201) expect(orgRes.body).not.toHaveProperty('polluted');
    });

    it('unicode look-alikes in tool names → 400 and nothing recorded; in the action → 403 NOT_IN_MANIFEST on the record', async () => {
      for (const name of ['оrder_lookup', 'order_lookuр', 'order\u200b_lookup', 'ｏrder_lookup', 'order_lookup\u0301', 'order‐lookup', 'ORDER_LOOKUP\u0130']) {
        const res = await post(toolUse(name, { action: 'lookup', orderId: '12345' }));
        expect(res.status, name).toBe(400);
        expect(res.body.code).toBe('BAD_REQUEST');
      }
      const action = await post(toolUse('order_lookup', { action: 'lооkup', orderId: '12345' }));
      expect(action.status).toBe(403);
      expect(action.body).toMatchObject({ status: 'blocked', errorCode: 'NOT_IN_MANIFEST' });
    });

    it('NUL bytes and lone surrogates in params, keys, actions and tool_use ids never break the ledger insert', async () => {
      // Each body with the one answer it must get: a NUL is recorded repaired (U+FFFD) and the call governed as usual;
      // a lone surrogate in a param is recorded repaired too, and the call refused (422 INVALID_INPUT: no vendor can be
      // sent text with no UTF-8 form); only a NUL in the tool_use id or type makes the body not a tool_use block (400,
      // nothing recorded).
      const bodies: [unknown, number, string][] = [
        [toolUse('order_lookup', { action: 'lookup', orderId: '123\u0000' }), 422, 'INVALID_INPUT'],
        [toolUse('order_lookup', { action: 'lookup', orderId: '12345', 'x\u0000y': 1 }), 422, 'INVALID_INPUT'],
        [toolUse('order_lookup', { action: 'look\u0000up', orderId: '12345' }), 403, 'NOT_IN_MANIFEST'],
        [toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: 'nul \u0000 inside a valid note' }), 200, 'succeeded'],
        [toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: 'lone surrogate \ud800 inside a valid note' }), 422, 'INVALID_INPUT'],
        [toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: 'reversed pair \udc00\ud800' }), 422, 'INVALID_INPUT'],
        [toolUse('order_lookup', { action: 'lookup', orderId: '12345', '\ud83d': 1 }), 422, 'INVALID_INPUT'],
        [toolUse('nango_proxy', { action: 'post', path: 'v1/x', body: { a: ['\u0000', { '\u0000': '\u0000' }] } }), 202, 'waiting_approval'],
        [toolUse('nango_proxy', { action: 'post', path: 'v1/x', body: { a: ['ok', { 'k\udfff': 1 }] } }), 422, 'INVALID_INPUT'],
        [toolUse('order_lookup', { action: 'lookup', orderId: '12345' }, 'toolu_\u0000nul'), 400, 'BAD_REQUEST'],
        [toolUse('order_lookup', { action: 'lookup', orderId: '12345' }, 'toolu_\ud800'), 400, 'BAD_REQUEST'],
        [{ type: 'tool_use\u0000', id: 'toolu_x', name: 'order_lookup', input: { action: 'lookup', orderId: '12345' } }, 400, 'BAD_REQUEST'],
      ];
      for (const [body, status, what] of bodies) {
        const res = await post(body);
        const label = `${res.status} ${res.text.slice(0, 300)} for ${JSON.stringify(body)}`;
        expectSane(res, JSON.stringify(body));
        expect(res.status, label).toBe(status);
        if (status === 400) {
          // not a tool_use block: a problem, nothing recorded
          expect(res.body, label).toMatchObject({ code: what });
          expect(res.body, label).not.toHaveProperty('toolCallId');
          continue;
        }
        expect(res.status < 300 ? res.body.status : res.body.errorCode, label).toBe(what);
        // Recorded with the model's text repaired (U+FFFD), and readable back from the ledger.
        const story = await h.t.http.get(`/v1/tool-calls/${res.body.toolCallId as string}`).set(bearer(ops));
        expect(story.status).toBe(200);
        expect(JSON.stringify(story.body)).not.toMatch(/\\u0000|\\ud[89ab]/i);
      }
      const recorded = await post(toolUse('order_lookup', { action: 'look\u0000up', orderId: '12345' }));
      expect(recorded.body).toMatchObject({ status: 'blocked', errorCode: 'NOT_IN_MANIFEST' });
      const row = await h.t.http.get(`/v1/tool-calls/${recorded.body.toolCallId as string}`).set(bearer(ops));
      expect(row.body.action).toBe('look\uFFFDup'); // replaced, never silently turned into the real action
      const named = await post(toolUse('order_lookup', { action: 'lookup', orderId: '12345', 'x\u0000y': 1 }));
      expect(named.status).toBe(422);
      expect(named.body.toolResult.content).toContain('x\uFFFDy');
      // An escaped backslash followed by "u0000" is plain text, not a NUL: still accepted.
      const text = await post(toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: 'literal \\u0000 text' }));
      expect(text.status).toBe(200);
      expect(text.body.status).toBe('succeeded');
    });

    it('NUL bytes and lone surrogates in admin bodies and in URLs → 400 (they cannot be stored)', async () => {
      for (const bad of ['\u0000', '\ud800']) {
        const cases: [string, string, Record<string, string>, unknown][] = [
          ['post', '/v1/orgs', adminAuth, { name: `x${bad}` }],
          ['post', '/v1/api-keys', adminAuth, { orgId: org.orgId, role: 'agent', name: `k${bad}` }],
          ['put', `/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`, adminAuth, { enabled: true, reason: `r${bad}` }],
          ['post', '/v1/runs', bearer(org.agentKey), { specialistId: 'support', metadata: { [`k${bad}`]: 'v' } }],
          ['post', `/v1/tool-calls/${crypto.randomUUID()}/reconcile`, bearer(ops), { status: 'failed', note: `n${bad}` }],
          ['post', `/v1/approvals/${crypto.randomUUID()}/decision`, bearer(expert), { decision: 'reject', actionDigest: 'a'.repeat(64), reason: `r${bad}` }],
        ];
        for (const [method, path, auth, body] of cases) {
          const res = await (method === 'post' ? h.t.http.post(path) : h.t.http.put(path)).set(auth).send(body as object);
          expectSane(res, `${path} ${JSON.stringify(body)}`);
          expect(res.status, `${path} ${JSON.stringify(body)}`).toBe(400);
        }
      }
      for (const path of ['/v1/tool-calls?toolName=%00', '/v1/tool-calls?action=a%00b', '/v1/tool-calls?correlationId=%00', '/v1/ledger/events?type=%00', `/v1/orgs/${org.orgId}/feature-flags/x%00`, `/v1/tool-calls/%00`]) {
        const res = await h.t.http.get(path).set(adminAuth);
        expectSane(res, path);
        expect(res.status, path).toBe(400);
      }
      // A malformed escape in the path is named, on every route (the router's own answer was a bare "Bad request").
      for (const path of ['/v1/orgs/%ZZ', `/v1/orgs/${org.orgId}/feature-flags/%E0%A4`, '/v1/tool-calls/%C3%28', '/v1/approvals/50%']) {
        const res = await h.t.http.get(path).set(adminAuth);
        expectSane(res, path);
        expect(res.status, path).toBe(400);
        expect(res.body.code, path).toBe('BAD_REQUEST');
        expect(res.body.detail, path).toMatch(/malformed percent-escape/);
      }
      // A well-formed escape is only a value.
      expect((await h.t.http.get('/v1/orgs/%2541').set(adminAuth)).body.code).toBe('NOT_FOUND');
    });

    it('number literals too big for a double (they parse to Infinity) → 400, on every route', async () => {
      for (const n of ['1e309', '-1e309', '9'.repeat(400), '1.5e99999']) {
        const res = await postRaw(`{"type":"tool_use","id":"toolu_inf","name":"order_lookup","input":{"action":"lookup","orderId":"12345","x":${n}}}`);
        expectSane(res, n);
        expect(res.status, n).toBe(400);
        const admin = await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set({ ...adminAuth, 'Content-Type': 'application/json' })
          .send(`{"rules":[{"id":"r","match":{"toolName":"order_lookup.lookup","where":[{"path":"orderId","op":"gt","value":${n}}]},"decision":"allow","reason":"x"}]}`);
        expect(admin.status, n).toBe(400);
      }
      const fine = await postRaw('{"type":"tool_use","id":"toolu_big","name":"order_lookup","input":{"action":"lookup","orderId":"12345","x":1e308}}');
      expect(fine.status).toBe(422); // a large finite number is just an unknown parameter
    });

    it('a body that is not JSON, not an object, or sent as another media type', async () => {
      // 415 for a media type other than JSON; 400 for a JSON body that does not parse or is no object.
      for (const [text, type, status] of [
        ['{"type":', 'application/json', 400],
        ['null', 'application/json', 400],
        ['"tool_use"', 'application/json', 400],
        ['12', 'application/json', 400],
        ['{"type":"tool_use"}', 'text/plain', 415],
        ['\u0000', 'application/json', 400],
        ['\ufeff{"type":"tool_use"}', 'application/json', 400],
      ] as const) {
        const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set({ ...bearer(org.agentKey), 'Content-Type': type }).send(text);
        expectSane(res, text);
        expect(res.status, `${JSON.stringify(text)} as ${type}`).toBe(status);
      }
    });
  });

  describe('filters, ids and limits', () => {
    const SQLISH = ["' OR 1=1 --", "'; DROP TABLE tool_calls; --", '" OR ""="', '1) OR (1=1', "\\'; SELECT pg_sleep(5); --", '%', '_', '*', "$1", '\\x00'];

    it('SQL-looking filter values are plain values: 200 with no rows, or 400', async () => {
      for (const v of SQLISH) {
        const q = encodeURIComponent(v);
        for (const path of [
          `/v1/tool-calls?toolName=${q}`,
          `/v1/tool-calls?action=${q}`,
          `/v1/tool-calls?errorCode=${q}`,
          `/v1/tool-calls?correlationId=${q}`,
          `/v1/tool-calls?status=${q}`,
          `/v1/tool-calls?since=${q}`,
          `/v1/ledger/events?type=${q}`,
          `/v1/ledger/events?since=${q}`,
          `/v1/tool-calls/export?format=ndjson&toolName=${q}`,
        ]) {
          const res = await h.t.http.get(path).set(bearer(ops));
          expectSane(res, path);
          expect([200, 400], `${res.status} ${path}`).toContain(res.status);
          if (res.status === 200 && Array.isArray(res.body.items)) expect(res.body.items, path).toEqual([]);
          if (res.status === 200 && !Array.isArray(res.body.items)) expect(res.text.trim(), path).toBe('');
        }
        for (const path of [`/v1/approvals?status=${q}`, `/v1/approvals?kind=${q}`, `/v1/approvals?runId=${q}`]) {
          const res = await h.t.http.get(path).set(bearer(expert));
          expectSane(res, path);
          expect(res.status, path).toBe(400);
        }
      }
      const all = await h.t.http.get('/v1/tool-calls?limit=200').set(bearer(ops));
      expect(all.body.items.length).toBeGreaterThanOrEqual(3); // the table is still there
    }, 60_000);

    it('timestamps at the calendar edges: year 0 (which PostgreSQL has not) → 400, years 1 and 9999 → 200', async () => {
      const paths = (q: string): string[] => [
        `/v1/tool-calls?since=${q}`,
        `/v1/tool-calls?until=${q}`,
        `/v1/tool-calls/export?format=csv&since=${q}`,
        `/v1/ledger/events?since=${q}`,
        `/v1/ledger/events?until=${q}`,
        `/v1/orgs/${org.orgId}/usage?from=${q}`,
        `/v1/orgs/${org.orgId}/usage?to=${q}`,
      ];
      for (const v of ['0000-01-01', '0000-12-31T23:59:59Z', '0000-06-01T00:00:00+01:00']) {
        for (const path of paths(encodeURIComponent(v))) {
          const res = await h.t.http.get(path).set(adminAuth);
          expectSane(res, path);
          expect(res.status, path).toBe(400);
          expect(res.body.code, path).toBe('VALIDATION_FAILED');
        }
      }
      for (const v of ['0001-01-01', '0001-01-01T00:00:00+01:00', '9999-12-31T23:59:59.999999Z']) {
        for (const path of paths(encodeURIComponent(v))) {
          const res = await h.t.http.get(path).set(adminAuth);
          expectSane(res, path);
          expect(res.status, `${res.status} ${path}`).toBe(200);
        }
      }
    }, 60_000);

    it('invalid UUIDs in paths → 404, in filters → 400; never 500', async () => {
      const bad = ['not-a-uuid', '00000000-0000-0000-0000-00000000000g', '00000000000000000000000000000000', "1' OR '1'='1", '%00', '..', '%2e%2e', 'a'.repeat(300), '{}', '[]'];
      const valid = ['00000000-0000-0000-0000-000000000000', 'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF', crypto.randomUUID()];
      for (const id of [...bad, ...valid]) {
        const e = encodeURIComponent(id);
        const checks: [string, () => Promise<Response>][] = [
          [`GET /v1/tool-calls/${e}`, () => h.t.http.get(`/v1/tool-calls/${e}`).set(bearer(ops))],
          [`GET /v1/tool-calls/${e}/result`, () => h.t.http.get(`/v1/tool-calls/${e}/result`).set(bearer(org.agentKey))],
          [`POST /v1/tool-calls/${e}/reconcile`, () => h.t.http.post(`/v1/tool-calls/${e}/reconcile`).set(bearer(ops)).send({ status: 'failed', note: 'x' })],
          [`GET /v1/approvals/${e}`, () => h.t.http.get(`/v1/approvals/${e}`).set(bearer(expert))],
          [`POST /v1/approvals/${e}/decision`, () => h.t.http.post(`/v1/approvals/${e}/decision`).set(bearer(expert)).send({ decision: 'approve', actionDigest: 'a'.repeat(64) })],
          [`GET /v1/runs/${e}`, () => h.t.http.get(`/v1/runs/${e}`).set(bearer(org.agentKey))],
          [`GET /v1/runs/${e}/tools`, () => h.t.http.get(`/v1/runs/${e}/tools`).set(bearer(org.agentKey))],
          [`POST /v1/runs/${e}/tool-calls`, () => h.t.http.post(`/v1/runs/${e}/tool-calls`).set(bearer(org.agentKey)).send(lookup())],
          [`GET /v1/orgs/${e}`, () => h.t.http.get(`/v1/orgs/${e}`).set(adminAuth)],
          [`GET /v1/orgs/${e}/usage`, () => h.t.http.get(`/v1/orgs/${e}/usage`).set(adminAuth)],
          [`GET /v1/orgs/${e}/feature-flags`, () => h.t.http.get(`/v1/orgs/${e}/feature-flags`).set(adminAuth)],
          [`GET /v1/orgs/${e}/integrations`, () => h.t.http.get(`/v1/orgs/${e}/integrations`).set(adminAuth)],
          [`DELETE /v1/api-keys/${e}`, () => h.t.http.delete(`/v1/api-keys/${e}`).set(adminAuth)],
        ];
        for (const [what, send] of checks) {
          const res = await send();
          expectSane(res, what);
          expect([400, 404], `${res.status} ${what}`).toContain(res.status);
        }
        for (const path of [`/v1/tool-calls?runId=${e}`, `/v1/tool-calls?orgId=${e}`, `/v1/ledger/events?runId=${e}`, `/v1/ledger/events?orgId=${e}`, `/v1/ledger/verify?orgId=${e}`]) {
          const res = await h.t.http.get(path).set(adminAuth);
          expectSane(res, path);
          if (bad.includes(id)) expect(res.status, path).toBe(400);
          else expect([200, 404], path).toContain(res.status);
        }
      }
    }, 60_000);

    it('negative, zero, fractional, huge, repeated or non-numeric limits → 400', async () => {
      for (const limit of ['-1', '0', '201', '1000000000', '99999999999999999999', '1.5', '1e2', 'abc', '', ' 5', '0x10', 'Infinity', 'NaN', '-0']) {
        for (const path of ['/v1/tool-calls', '/v1/ledger/events', '/v1/approvals']) {
          const res = await h.t.http.get(`${path}?limit=${encodeURIComponent(limit)}`).set(bearer(ops));
          expectSane(res, `${path} limit=${limit}`);
          expect(res.status, `${path}?limit=${limit}`).toBe(400);
        }
      }
      for (const path of ['/v1/tool-calls?limit=1&limit=2', '/v1/ledger/events?limit=1&limit=2', '/v1/approvals?limit=1&limit=2', '/v1/tool-calls?cursor=a&cursor=b', '/v1/tool-calls?runId=a&runId=b']) {
        const res = await h.t.http.get(path).set(bearer(ops));
        expectSane(res, path);
        expect(res.status, path).toBe(400);
      }
      for (const waitMs of ['-1', '30001', '1e3', 'abc', '99999999999']) {
        // The bad waitMs is refused before the (unknown) call is looked up.
        const res = await h.t.http.get(`/v1/tool-calls/${crypto.randomUUID()}/result?waitMs=${waitMs}`).set(bearer(org.agentKey));
        expectSane(res);
        expect(res.status, `waitMs=${waitMs}`).toBe(400);
      }
    });

    it('tampered cursors → 400', async () => {
      const first = await h.t.http.get('/v1/tool-calls?limit=1').set(bearer(ops));
      const cursor = first.body.nextCursor as string;
      expect(cursor).toMatch(/\./);
      const [body, mac] = cursor.split('.');
      const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
      const forged = Buffer.from(JSON.stringify({ v: 1, k: 'tool-calls', o: '*', f: 'x', t: '2020-01-01T00:00:00.000000Z', i: '1' })).toString('base64url');
      for (const c of [flip(cursor, 0), flip(cursor, cursor.length - 1), `${body}.`, `.${mac}`, body, `${forged}.${mac}`, `${body}.${mac}.${mac}`, 'null', '.', '..', `${body}.${mac}=`]) {
        const res = await h.t.http.get(`/v1/tool-calls?limit=1&cursor=${encodeURIComponent(c)}`).set(bearer(ops));
        expectSane(res, c);
        expect(res.status, c).toBe(400);
      }
      // A genuine cursor with another filter set → 400 too.
      const other = await h.t.http.get(`/v1/tool-calls?limit=1&toolName=order_lookup&cursor=${encodeURIComponent(cursor)}`).set(bearer(ops));
      expect(other.status).toBe(400);
      // A cursor of one listing is refused by another.
      const events = await h.t.http.get(`/v1/ledger/events?limit=1&cursor=${encodeURIComponent(cursor)}`).set(bearer(ops));
      expect(events.status).toBe(400);
    });
  });

  describe('headers', () => {
    it('Idempotency-Key, X-Correlation-Id and Authorization variants', async () => {
      // (Node's client refuses to send bytes outside latin-1, so those never reach a server.)
      for (const key of ['', 'a'.repeat(256), 'clé', '\t', 'k\u00ff', 'a\tb']) {
        const res = await post(lookup(), { 'Idempotency-Key': key });
        expectSane(res, `Idempotency-Key ${JSON.stringify(key)}`);
        expect(res.status, JSON.stringify(key)).toBe(400);
      }
      const cid = await post(lookup(), { 'X-Correlation-Id': `bad id ${'x'.repeat(300)}` });
      expect(cid.status).toBe(200);
      expect(cid.headers['x-correlation-id']).toMatch(/^[0-9a-f-]{36}$/);
      // The scheme is case-insensitive (RFC 9110 §11.1): "bearer <key>" is the key; everything else here is not.
      const lower = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set('Authorization', `bearer ${org.agentKey}`).send(lookup());
      expect(lower.status).toBe(200);
      for (const auth of ['', 'Bearer', 'Bearer ', `bearer${org.agentKey}`, `Bearer ${org.agentKey.toUpperCase()}`, org.agentKey, `Bearer  ${org.agentKey}`, `Bearer ${org.agentKey} x`, `Basic ${Buffer.from('a:b').toString('base64')}`, `Bearer ${'k'.repeat(5000)}`, 'Bearer \u00ff\u00fe']) {
        const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set('Authorization', auth).send(lookup());
        expectSane(res, auth.slice(0, 40));
        expect(res.status, auth.slice(0, 40)).toBe(401);
      }
    });
  });

  describe('Nango path tricks through the pipeline', () => {
    it('every hostile path is refused before any vendor request: 422 INVALID_INPUT', async () => {
      const before = h.emu.count({ vendor: 'nango' });
      for (const [label, path] of HOSTILE_NANGO_PATHS) {
        for (const action of ['get', 'post'] as const) {
          const input = action === 'get' ? { action, path } : { action, path, body: { a: 1 } };
          const res = await post(toolUse('nango_proxy', input));
          expectSane(res, label);
          expect(res.status, `${label}: ${res.status} ${JSON.stringify(res.body)}`).toBe(422);
          expect(res.body).toMatchObject({ status: 'failed', errorCode: 'INVALID_INPUT' });
        }
      }
      expect(h.emu.count({ vendor: 'nango' })).toBe(before);
      expect(h.emu.requests.filter((r) => r.vendor === undefined)).toEqual([]);
    });
  });
});
