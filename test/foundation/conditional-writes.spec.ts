import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CREDENTIALS } from '../support/scenario.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * RFC 9110 §13.1: an origin server evaluates If-Match and If-None-Match before performing a write. Only the whole-set
 * PUTs (policies, tool permissions) did; elsewhere the headers were dropped (HTTP request review): a PUT of a feature
 * flag sent with If-Match naming a tag it had read wrote anyway, and If-None-Match: * ("only if nothing is there")
 * replaced an existing policy set. A client asking for lost-update protection now gets it or a 412, never silence.
 */
describe('preconditions on writes', () => {
  let t: TestApp;
  let orgId: string;
  beforeAll(async () => {
    t = await startTestApp();
    orgId = await createOrg(t, 'Conditional Co');
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  const flagOn = async () => (await t.http.get(`/v1/orgs/${orgId}/feature-flags`).set(adminAuth)).body.tool_calling_enabled as boolean;
  const putFlag = (headers: Record<string, string>, enabled: boolean) =>
    t.http.put(`/v1/orgs/${orgId}/feature-flags/tool_calling_enabled`).set({ ...adminAuth, ...headers }).send({ enabled });
  const rules = (id: string) => ({ rules: [{ id, match: { toolName: 'order_lookup.lookup' }, decision: 'allow' }] });

  it('If-Match naming a tag on a write whose resource has none: 412 PRECONDITION_FAILED, nothing written', async () => {
    const before = await flagOn();
    const res = await putFlag({ 'If-Match': '"not-the-current-tag"' }, !before);
    expect(res.status).toBe(412);
    expect(res.body).toMatchObject({ code: 'PRECONDITION_FAILED' });
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(await flagOn()).toBe(before);
  });

  it('If-Match: * holds (the flag exists), and a malformed If-Match is 400 as on the routes that evaluate it', async () => {
    const before = await flagOn();
    expect((await putFlag({ 'If-Match': '*' }, !before)).status).toBe(200);
    expect(await flagOn()).toBe(!before);
    const bad = await putFlag({ 'If-Match': 'no-quotes' }, before);
    expect(bad.status).toBe(400);
    expect(await flagOn()).toBe(!before);
  });

  it('If-None-Match: * on a write: 412, the policy set not replaced; a list of tags holds (none of ours matches it)', async () => {
    expect((await t.http.put(`/v1/orgs/${orgId}/policies`).set(adminAuth).send(rules('first'))).status).toBe(200);
    const res = await t.http.put(`/v1/orgs/${orgId}/policies`).set({ ...adminAuth, 'If-None-Match': '*' }).send(rules('second'));
    expect(res.status).toBe(412);
    expect((await t.http.get(`/v1/orgs/${orgId}/policies`).set(adminAuth)).body.rules[0].id).toBe('first');
    const tags = await t.http.put(`/v1/orgs/${orgId}/policies`).set({ ...adminAuth, 'If-None-Match': '"x"' }).send(rules('third'));
    expect(tags.status).toBe(200);
    expect(tags.body.rules[0].id).toBe('third');
  });

  it('the routes that evaluate If-Match still do: the current ETag passes, an old one is 412', async () => {
    const got = await t.http.get(`/v1/orgs/${orgId}/policies`).set(adminAuth);
    const tag = got.headers.etag as string;
    const ok = await t.http.put(`/v1/orgs/${orgId}/policies`).set({ ...adminAuth, 'If-Match': tag }).send(rules('fourth'));
    expect(ok.status).toBe(200);
    const stale = await t.http.put(`/v1/orgs/${orgId}/policies`).set({ ...adminAuth, 'If-Match': tag }).send(rules('fifth'));
    expect(stale.status).toBe(412);
  });

  it('If-None-Match naming the set\'s current ETag (weakly too) on the whole-set PUTs: 412, nothing written; another tag holds', async () => {
    const tag = (await t.http.get(`/v1/orgs/${orgId}/policies`).set(adminAuth)).headers.etag as string;
    for (const named of [tag, `W/${tag}`, `"other", ${tag}`]) {
      const res = await t.http.put(`/v1/orgs/${orgId}/policies`).set({ ...adminAuth, 'If-None-Match': named }).send(rules('not-written'));
      expect([named, res.status, res.body.code]).toEqual([named, 412, 'PRECONDITION_FAILED']);
      expect(res.headers.etag).toBe(tag);
    }
    expect((await t.http.get(`/v1/orgs/${orgId}/policies`).set(adminAuth)).body.rules[0].id).not.toBe('not-written');
    const permTag = (await t.http.get(`/v1/orgs/${orgId}/tool-permissions`).set(adminAuth)).headers.etag as string;
    const perms = await t.http.put(`/v1/orgs/${orgId}/tool-permissions`).set({ ...adminAuth, 'If-None-Match': permTag }).send({ items: [] });
    expect(perms.status).toBe(412);
    expect((await t.http.put(`/v1/orgs/${orgId}/policies`).set({ ...adminAuth, 'If-None-Match': '"other"' }).send(rules('written'))).status).toBe(200);
  });

  it('only those sets answer an ETag: no automatic one a client could send back to no effect', async () => {
    expect((await t.http.get(`/v1/orgs/${orgId}/feature-flags`).set(adminAuth)).headers.etag).toBeUndefined();
    expect((await putFlag({}, await flagOn())).headers.etag).toBeUndefined();
    expect((await t.http.get(`/v1/orgs/${orgId}/policies`).set(adminAuth)).headers.etag).toMatch(/^"\d+"$/);
  });

  it('on the whole-set PUTs a target out of reach is 404 whatever the preconditions, and If-None-Match: * there is 412 with the ETag', async () => {
    const other = await createOrg(t, 'Conditional Other Co');
    const otherAdmin = (await createKey(t, other, 'admin')).key;
    const withHeader = await t.http.put(`/v1/orgs/${orgId}/policies`).set({ ...bearer(otherAdmin), 'If-None-Match': '*' }).send(rules('x'));
    const without = await t.http.put(`/v1/orgs/${orgId}/policies`).set(bearer(otherAdmin)).send(rules('x'));
    expect(withHeader.status).toBe(without.status);
    expect(withHeader.status).not.toBe(412);
    const own = await t.http.put(`/v1/orgs/${orgId}/policies`).set({ ...adminAuth, 'If-None-Match': '*' }).send(rules('x'));
    expect(own.status).toBe(412);
    expect(own.headers.etag).toMatch(/^"\d+"$/);
  });

  /**
   * The credentials PUT creates or replaces, so its target may not exist: If-Match: * ("only replace") answered 200 and
   * stored credentials an admin had just deleted (RFC 9110 §13.1.1: false when there is no current representation),
   * and If-None-Match: * ("only create") was 412 even when none were stored. Each is now decided by the write itself.
   */
  describe('credentials PUT: * preconditions on a target that may not exist', () => {
    const url = () => `/v1/orgs/${orgId}/integrations/nango/credentials`;
    const config = (connectionId: string) => ({ config: { ...CREDENTIALS.nango, connectionId } });
    const stored = async (): Promise<string | undefined> =>
      ((await t.http.get(`/v1/orgs/${orgId}/integrations`).set(adminAuth)).body.items as { integrationType: string; fingerprint: string }[]).find(
        (i) => i.integrationType === 'nango',
      )?.fingerprint;

    it('If-Match: * with none stored is 412 and stores nothing; with some stored it replaces them', async () => {
      expect(await stored()).toBeUndefined();
      const none = await t.http.put(url()).set({ ...adminAuth, 'If-Match': '*' }).send(config('conn-a'));
      expect(none.status).toBe(412);
      expect(none.body.code).toBe('PRECONDITION_FAILED');
      expect(await stored()).toBeUndefined();
      const created = await t.http.put(url()).set(adminAuth).send(config('conn-a'));
      expect(created.status).toBe(200);
      const replaced = await t.http.put(url()).set({ ...adminAuth, 'If-Match': '*' }).send(config('conn-b'));
      expect(replaced.status).toBe(200);
      expect(replaced.body.fingerprint).not.toBe(created.body.fingerprint);
      expect(await stored()).toBe(replaced.body.fingerprint);
      // Deleted by another admin: "only replace" does not bring them back.
      expect((await t.http.delete(url()).set(adminAuth)).status).toBe(204);
      expect((await t.http.put(url()).set({ ...adminAuth, 'If-Match': '*' }).send(config('conn-c'))).status).toBe(412);
      expect(await stored()).toBeUndefined();
    });

    it('If-None-Match: * creates when none are stored, once: of 8 at once exactly one is stored, the rest 412', async () => {
      const puts = await Promise.all(
        Array.from({ length: 8 }, (_, i) => t.http.put(url()).set({ ...adminAuth, 'If-None-Match': '*' }).send(config(`conn-race-${i}`))),
      );
      const ok = puts.filter((r) => r.status === 200);
      expect(puts.map((r) => r.status).sort()).toEqual([200, 412, 412, 412, 412, 412, 412, 412]);
      expect(await stored()).toBe(ok[0]!.body.fingerprint);
      const again = await t.http.put(url()).set({ ...adminAuth, 'If-None-Match': '*' }).send(config('conn-late'));
      expect(again.status).toBe(412);
      expect(await stored()).toBe(ok[0]!.body.fingerprint);
      // A list of tags always holds (credentials have none); If-Match naming tags never does; both * never.
      expect((await t.http.put(url()).set({ ...adminAuth, 'If-None-Match': '"x"' }).send(config('conn-d'))).status).toBe(200);
      const tagged = await t.http.put(url()).set({ ...adminAuth, 'If-Match': '"x"' }).send(config('conn-e'));
      const both = await t.http.put(url()).set({ ...adminAuth, 'If-Match': '*', 'If-None-Match': '*' }).send(config('conn-f'));
      expect([tagged.status, both.status]).toEqual([412, 412]);
      expect((await t.http.put(url()).set({ ...adminAuth, 'If-Match': 'bad' }).send(config('conn-g'))).status).toBe(400);
      const events = (await t.http.get('/v1/ledger/events').set(adminAuth).query({ orgId, type: 'credentials.updated' })).body.items as unknown[];
      // conn-a, conn-b, one of the race, conn-d: nothing refused left an event.
      expect(events).toHaveLength(4);
    });
  });

  it('a request refused without its preconditions is refused as before: no key is 401, not 412', async () => {
    const res = await t.http.put(`/v1/orgs/${orgId}/feature-flags/tool_calling_enabled`).set({ 'If-Match': '"x"' }).send({ enabled: true });
    expect(res.status).toBe(401);
  });
});
