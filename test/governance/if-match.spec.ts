import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { allow, deny, eventsOf, type PermissionItem } from './governance.helpers.js';

/**
 * Two admins editing the same org's permissions or policy: each PUT replaces the whole set, so without a check the
 * second silently undoes the first. GET answers an ETag; a PUT sent with If-Match: <it> is refused 412
 * PRECONDITION_FAILED, nothing written, once another change came first. Without If-Match the last PUT wins.
 */
describe('If-Match on the PUTs that replace a set', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  const RULES_A = [{ id: 'a', match: { toolName: 'shopify_refund.create' }, decision: 'require_expert_approval' }];
  const RULES_B = [{ id: 'b', match: { toolName: 'shopify_refund.create' }, decision: 'block' }];

  describe('tool permissions', () => {
    const path = (org: string) => `/v1/orgs/${org}/tool-permissions`;
    const put = (org: string, items: PermissionItem[], ifMatch?: string, auth = adminAuth) => {
      const req = t.http.put(path(org)).set(auth);
      return (ifMatch === undefined ? req : req.set('If-Match', ifMatch)).send({ items });
    };

    it('GET and PUT answer the set’s ETag; a PUT against the tag it replaced passes, one against an older tag is 412 with nothing written', async () => {
      const org = await createOrg(t, 'IfMatch Perm Co');
      const first = await t.http.get(path(org)).set(adminAuth);
      expect(first.status).toBe(200);
      const tag0 = first.headers.etag as string;
      expect(tag0).toMatch(/^"[A-Za-z0-9_-]{22}"$/);

      // Admin 1 and admin 2 both read tag0; admin 1 writes first.
      const one = await put(org, [allow('order_lookup', 'lookup')], tag0);
      expect(one.status).toBe(200);
      const tag1 = one.headers.etag as string;
      expect(tag1).not.toBe(tag0);
      expect((await t.http.get(path(org)).set(adminAuth)).headers.etag).toBe(tag1); // GET agrees with the PUT's answer

      const two = await put(org, [allow('shopify_query', 'get_product')], tag0);
      expect(two.status).toBe(412);
      expect(two.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(two.body).toMatchObject({ status: 412, code: 'PRECONDITION_FAILED' });
      expect(two.headers.etag).toBe(tag1); // the current tag, to read against
      expect((await t.http.get(path(org)).set(adminAuth)).body.items).toEqual([allow('order_lookup', 'lookup')]);
      expect(await eventsOf(t, org, 'tool_permissions.changed')).toHaveLength(1); // the refused PUT recorded nothing

      // Re-read, re-applied against the current tag: passes.
      const again = await put(org, [allow('order_lookup', 'lookup'), allow('shopify_query', 'get_product')], tag1);
      expect(again.status).toBe(200);
    });

    it('the tag follows the content, not the order sent or the write: the same set written again keeps its tag', async () => {
      const org = await createOrg(t, 'IfMatch Perm Order Co');
      const a = await put(org, [allow('order_lookup', 'lookup'), deny('shopify_query', 'get_product', 'bot-1')]);
      const b = await put(org, [deny('shopify_query', 'get_product', 'bot-1'), allow('order_lookup', 'lookup')], a.headers.etag as string);
      expect(b.status).toBe(200);
      expect(b.headers.etag).toBe(a.headers.etag);
      const c = await put(org, [allow('order_lookup', 'lookup'), allow('shopify_query', 'get_product', 'bot-1')], a.headers.etag as string); // enabled flipped
      expect(c.headers.etag).not.toBe(a.headers.etag);
    });

    it('no If-Match and * always pass (the last PUT wins); a list matches any of its tags; a weak tag never matches; a malformed header is 400', async () => {
      const org = await createOrg(t, 'IfMatch Perm Syntax Co');
      const tag0 = (await t.http.get(path(org)).set(adminAuth)).headers.etag as string;
      expect((await put(org, [allow('order_lookup', 'lookup')])).status).toBe(200);
      expect((await put(org, [allow('order_lookup', 'lookup')], '*')).status).toBe(200);
      const tag1 = (await t.http.get(path(org)).set(adminAuth)).headers.etag as string;
      expect((await put(org, [], `"nope", ${tag1}`)).status).toBe(200);
      const tag2 = (await t.http.get(path(org)).set(adminAuth)).headers.etag as string;
      expect(tag2).toBe(tag0); // the empty set again
      expect((await put(org, [allow('order_lookup', 'lookup')], `W/${tag2}`)).status).toBe(412);
      expect((await put(org, [allow('order_lookup', 'lookup')], '')).status).toBe(412); // an empty list matches nothing
      for (const bad of ['nope', '"a" "b"', '"a"x', 'W/', '"unterminated']) {
        const res = await put(org, [allow('order_lookup', 'lookup')], bad);
        expect(res.status, bad).toBe(400);
        expect(res.body.code, bad).toBe('BAD_REQUEST');
      }
      expect((await t.http.get(path(org)).set(adminAuth)).body.items).toEqual([]); // none of those wrote anything
    });

    it('concurrent PUTs against one tag: exactly one is written, the others 412', async () => {
      const org = await createOrg(t, 'IfMatch Perm Race Co');
      const tag0 = (await t.http.get(path(org)).set(adminAuth)).headers.etag as string;
      const admin = bearer((await createKey(t, org, 'admin')).key);
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => put(org, [allow('order_lookup', 'lookup', `bot-${i}`)], tag0, admin)));
      expect(answers.map((a) => a.status).sort()).toEqual([200, 412, 412, 412, 412, 412, 412, 412]);
      const winner = answers.find((a) => a.status === 200)!;
      expect((await t.http.get(path(org)).set(adminAuth)).body.items).toEqual(winner.body.items);
      expect(await eventsOf(t, org, 'tool_permissions.changed')).toHaveLength(1);
    });

    it('the precondition is checked after validation and access: a bad body is 400, another org’s admin 404, whatever If-Match says', async () => {
      const org = await createOrg(t, 'IfMatch Perm Access Co');
      const other = await createOrg(t, 'IfMatch Perm Other Co');
      const otherAdmin = bearer((await createKey(t, other, 'admin')).key);
      expect((await put(org, [allow('no_such_tool', 'x')], '"stale"')).status).toBe(400);
      expect((await put(org, [allow('order_lookup', 'lookup')], '"stale"', otherAdmin)).status).toBe(404);
    });
  });

  describe('policies', () => {
    const path = (org: string) => `/v1/orgs/${org}/policies`;
    const put = (org: string, rules: unknown[], ifMatch?: string) => {
      const req = t.http.put(path(org)).set(adminAuth);
      return (ifMatch === undefined ? req : req.set('If-Match', ifMatch)).send({ rules });
    };

    it('the ETag is the version; a PUT against a replaced version is 412 with nothing written, against the current one passes', async () => {
      const org = await createOrg(t, 'IfMatch Policy Co');
      const first = await t.http.get(path(org)).set(adminAuth);
      expect(first.headers.etag).toBe('"0"');
      const one = await put(org, RULES_A, '"0"');
      expect([one.status, one.headers.etag, one.body.version]).toEqual([200, '"1"', 1]);
      const two = await put(org, RULES_B, '"0"');
      expect(two.status).toBe(412);
      expect(two.body.code).toBe('PRECONDITION_FAILED');
      expect(two.headers.etag).toBe('"1"');
      const now = await t.http.get(path(org)).set(adminAuth);
      expect([now.headers.etag, now.body.version, now.body.rules]).toEqual(['"1"', 1, RULES_A]);
      expect(await eventsOf(t, org, 'policy.changed')).toHaveLength(1);
      expect((await put(org, RULES_B, '"1"')).status).toBe(200);
      expect((await put(org, RULES_A)).headers.etag).toBe('"3"'); // no If-Match: the last PUT wins, as before
    });

    it('a refused PUT answers no ETag of its own: a client keeping the last answer\'s ETag sends the policy\'s version next, not a tag of the problem document', async () => {
      const orgId = await createOrg(t);
      const url = `/v1/orgs/${orgId}/policies`;
      expect((await t.http.put(url).set(adminAuth).send({ rules: [{ id: 'a', match: { toolName: 'order_lookup.lookup' }, decision: 'allow' }] })).status).toBe(200);
      const bad = await t.http.put(url).set(adminAuth).set('If-Match', '"1"').send({ rules: [{ id: 'a' }] });
      expect(bad.status).toBe(400);
      expect(bad.headers.etag).toBeUndefined();
      expect(bad.headers['content-type']).toBe('application/problem+json; charset=utf-8');
      expect(Number(bad.headers['content-length'])).toBe(Buffer.byteLength(JSON.stringify(bad.body)));
      const missing = await t.http.get('/v1/orgs/00000000-0000-4000-8000-000000000001/policies').set(adminAuth);
      expect([missing.status, missing.headers.etag]).toEqual([404, undefined]);
      const head = await t.http.head('/v1/orgs/00000000-0000-4000-8000-000000000001/policies').set(adminAuth);
      expect([head.status, head.headers.etag, head.text ?? '']).toEqual([404, undefined, '']);
      // The 412's ETag is the policy's current one, as before.
      const stale = await t.http.put(url).set(adminAuth).set('If-Match', '"0"').send({ rules: [] });
      expect([stale.status, stale.headers.etag]).toEqual([412, '"1"']);
      const fixed = await t.http.put(url).set(adminAuth).set('If-Match', '"1"').send({ rules: [{ id: 'a', match: { toolName: 'order_lookup.lookup' }, decision: 'allow' }] });
      expect([fixed.status, fixed.headers.etag]).toEqual([200, '"2"']);
    });

    it('two first PUTs of an org with no policy yet, both against "0": one is written, the other 412', async () => {
      const org = await createOrg(t, 'IfMatch Policy Race Co');
      const answers = await Promise.all([put(org, RULES_A, '"0"'), put(org, RULES_B, '"0"'), put(org, RULES_A, '"0"')]);
      expect(answers.map((a) => a.status).sort()).toEqual([200, 412, 412]);
      const now = await t.http.get(path(org)).set(adminAuth);
      expect(now.body.version).toBe(1);
      expect(await eventsOf(t, org, 'policy.changed')).toHaveLength(1);
    });
  });
});
