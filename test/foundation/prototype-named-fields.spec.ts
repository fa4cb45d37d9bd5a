import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postApiKey } from '../support/api-keys.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Field names that are also Object.prototype members (toString, constructor, __proto__) were invisible to
 * validation: class-transformer never copies them, so unknown ones slipped through, and free-form JSON lost them
 * without a word. Each is now kept or refused, never silently dropped.
 */
describe('fields named like Object.prototype members', () => {
  let t: TestApp;
  let org: string;
  let adm: string;
  let ops: string;
  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Prototype names');
    adm = (await createKey(t, org, 'admin')).key;
    ops = (await createKey(t, org, 'ops')).key;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('an unknown body or query field named toString, hasOwnProperty or constructor is refused with 400, like any other unknown field', async () => {
    // Counted before: the shared database may hold an org named 'x' already (a fuzzer's well-formed body).
    const named = async () => ((await t.ds.query(`SELECT count(*)::int AS n FROM orgs WHERE name = 'x'`)) as [{ n: number }])[0].n;
    const before = await named();
    const orgRes = await t.http.post('/v1/orgs').set(adminAuth).set('Content-Type', 'application/json').send('{"name":"x","toString":"y"}');
    expect([orgRes.status, orgRes.body.code, orgRes.body.errors]).toEqual([400, 'VALIDATION_FAILED', ['toString: property toString should not exist']]);
    const keyRes = await postApiKey(t.http, bearer(adm), { orgId: org, role: 'agent', name: 'n', constructor: 'x' });
    expect([keyRes.status, keyRes.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    const list = await t.http.get('/v1/tool-calls?hasOwnProperty=1').set(bearer(ops));
    expect([list.status, list.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    // Nothing was created by the refused requests.
    expect(await named()).toBe(before);
  });

  it('run metadata keeps keys named like prototype members; constructor and __proto__ anywhere in it are refused by path, not dropped', async () => {
    const metadata = { toString: 'ts', valueOf: 1, hasOwnProperty: true, nested: { isPrototypeOf: 'x', keep: 2 } };
    const res = await t.http.post('/v1/runs').set(bearer(adm)).send({ specialistId: 'support', metadata });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect((await t.http.get(`/v1/runs/${res.body.id}`).set(bearer(adm))).body.metadata).toEqual(metadata);

    for (const [body, path] of [
      ['{"specialistId":"support","metadata":{"a":[{"constructor":"c"}]}}', 'metadata.a[0].constructor'],
      ['{"specialistId":"support","metadata":{"__proto__":{"admin":true}}}', 'metadata.__proto__'],
      ['{"specialistId":"support","metadata":{"keep":1,"nested":{"prototype":{"x":1}}}}', 'metadata.nested.prototype'],
    ] as const) {
      const bad = await t.http.post('/v1/runs').set(bearer(adm)).set('Content-Type', 'application/json').send(body);
      expect([bad.status, bad.body.code, bad.body.errors], body).toEqual([
        400,
        'VALIDATION_FAILED',
        [`${path}: keys named "constructor", "prototype" or "__proto__" are not accepted`],
      ]);
    }
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it('inside a nested DTO too: a tool-permission item with an unknown toString field is refused like one with any other unknown field', async () => {
    const item = { toolName: 'order_lookup', action: 'lookup', specialistId: null, enabled: true };
    const path = `/v1/orgs/${org}/tool-permissions`;
    for (const extra of ['bogus', 'toString', 'hasOwnProperty']) {
      const res = await t.http.put(path).set(bearer(adm)).send({ items: [item, { ...item, specialistId: 'x', [extra]: 'y' }] });
      expect([res.status, res.body.code], extra).toEqual([400, 'VALIDATION_FAILED']);
      expect(res.body.detail, extra).toContain(`items.1.${extra}`); // the path as the validator names any other
    }
    // The same items without it are taken.
    expect((await t.http.put(path).set(bearer(adm)).send({ items: [item] })).status).toBe(200);
  });
});
