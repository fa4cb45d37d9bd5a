import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { allow, allowedToolsOf, deny, eventsOf, expectProblem, putPermissions, withoutCorrelation, type PermissionItem } from './governance.helpers.js';

const byKey = (a: PermissionItem, b: PermissionItem): number =>
  `${a.toolName}.${a.action}|${a.specialistId ?? ''}`.localeCompare(`${b.toolName}.${b.action}|${b.specialistId ?? ''}`);

describe('tool permissions (GET/PUT /v1/orgs/:orgId/tool-permissions)', () => {
  let t: TestApp;
  let org: string;
  let admin: { key: string; id: string };
  let ops: { key: string; id: string };
  const path = (): string => `/v1/orgs/${org}/tool-permissions`;

  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Perm Co');
    admin = await createKey(t, org, 'admin');
    ops = await createKey(t, org, 'ops');
  });
  afterAll(async () => {
    await t?.close();
  });

  it('starts empty', async () => {
    const res = await t.http.get(path()).set(bearer(admin.key));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ items: [] });
  });

  it('replaces the whole set on PUT, with a tool_permissions.changed event naming the actor', async () => {
    const first = [allow('order_lookup', 'lookup'), deny('shopify_refund', 'create'), allow('kyc', 'get_status', 'kyc-bot')];
    const put1 = await t.http.put(path()).set(bearer(admin.key)).send({ items: first });
    expect(put1.status).toBe(200);
    expect([...(put1.body.items as PermissionItem[])].sort(byKey)).toEqual([...first].sort(byKey));
    const get1 = await t.http.get(path()).set(bearer(admin.key));
    expect([...(get1.body.items as PermissionItem[])].sort(byKey)).toEqual([...first].sort(byKey));

    const second = [allow('kyc', 'get_status', 'kyc-bot')];
    const put2 = await t.http.put(path()).set(bearer(admin.key)).send({ items: second });
    expect(put2.status).toBe(200);
    expect(put2.body).toEqual({ items: second });
    expect((await t.http.get(path()).set(bearer(admin.key))).body).toEqual({ items: second });

    const events = await eventsOf(t, org, 'tool_permissions.changed');
    expect(events).toHaveLength(2);
    for (const e of events) expect(e.actor).toEqual({ keyId: admin.id, role: 'admin', correlationId: expect.stringMatching(/^[0-9a-f-]{36}$/) }); // the request's, as echoed
    expect(events[0].metadata).toMatchObject({ count: 3, enabled: 2 });
    expect(events[1].metadata).toMatchObject({ count: 1, enabled: 1 });

    const cleared = await t.http.put(path()).set(bearer(admin.key)).send({ items: [] });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toEqual({ items: [] });
    expect(await eventsOf(t, org, 'tool_permissions.changed')).toHaveLength(3);
  });

  it('lists in a stable order: by tool, then action, the org-wide row before the specialists', async () => {
    const sorted = [
      allow('kyc', 'get_status'),
      deny('kyc', 'get_status', 'bot-a'),
      allow('kyc', 'get_status', 'bot-b'),
      allow('order_lookup', 'lookup'),
      allow('shopify_refund', 'create', 'refund-bot'),
    ];
    const scrambled = [sorted[4], sorted[2], sorted[0], sorted[3], sorted[1]];
    const put = await t.http.put(path()).set(bearer(admin.key)).send({ items: scrambled });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ items: sorted });
    expect((await t.http.get(path()).set(bearer(ops.key))).body).toEqual({ items: sorted });
  });

  // API.md §2: every item is {toolName, action, specialistId|null, enabled}. An admin who forgets the field must
  // not grant the action to every specialist: only an explicit null means org-wide.
  it('refuses an item without specialistId (400 naming it) and keeps the old set; null is org-wide', async () => {
    const before = [allow('kyc', 'get_status', 'kyc-bot')];
    await putPermissions(t, org, admin.key, before);
    const events = (await eventsOf(t, org, 'tool_permissions.changed')).length;
    const res = await t.http
      .put(path())
      .set(bearer(admin.key))
      .send({ items: [allow('kyc', 'get_status', 'kyc-bot'), { toolName: 'order_lookup', action: 'lookup', enabled: true }] });
    expectProblem(res, 400, 'VALIDATION_FAILED');
    expect(res.body.detail).toContain('items.1.specialistId: required');
    expect((await t.http.get(path()).set(bearer(admin.key))).body).toEqual({ items: before });
    expect(await eventsOf(t, org, 'tool_permissions.changed')).toHaveLength(events);

    const orgWide = await t.http.put(path()).set(bearer(admin.key)).send({ items: [{ toolName: 'order_lookup', action: 'lookup', specialistId: null, enabled: true }] });
    expect(orgWide.status).toBe(200);
    expect(orgWide.body).toEqual({ items: [allow('order_lookup', 'lookup')] });
  });

  describe('refuses a bad set with 400 naming the entry, and keeps the old set', () => {
    const before = [allow('order_lookup', 'lookup')];
    let eventsBefore = 0;

    beforeAll(async () => {
      await putPermissions(t, org, admin.key, before);
      eventsBefore = (await eventsOf(t, org, 'tool_permissions.changed')).length;
    });

    const unchanged = async (): Promise<void> => {
      expect((await t.http.get(path()).set(bearer(admin.key))).body).toEqual({ items: before });
      expect(await eventsOf(t, org, 'tool_permissions.changed')).toHaveLength(eventsBefore);
    };

    it('an unknown tool', async () => {
      const res = await t.http.put(path()).set(bearer(admin.key)).send({ items: [allow('order_lookup', 'lookup'), allow('stripe_charge', 'create')] });
      expectProblem(res, 400, 'VALIDATION_FAILED');
      expect(res.body.detail).toContain('items[1]');
      expect(res.body.detail).toContain('stripe_charge.create');
      await unchanged();
    });

    it('an unknown action of a known tool', async () => {
      const res = await t.http.put(path()).set(bearer(admin.key)).send({ items: [allow('order_lookup', 'delete')] });
      expectProblem(res, 400, 'VALIDATION_FAILED');
      expect(res.body.detail).toContain('items[0]');
      expect(res.body.detail).toContain('order_lookup.delete');
      await unchanged();
    });

    it('a duplicate entry (same action and specialist), whatever its enabled flag', async () => {
      const orgWide = await t.http
        .put(path())
        .set(bearer(admin.key))
        .send({ items: [allow('order_lookup', 'lookup'), allow('kyc', 'get_status'), deny('order_lookup', 'lookup')] });
      expectProblem(orgWide, 400, 'VALIDATION_FAILED');
      expect(orgWide.body.detail).toContain('items[2]');
      expect(orgWide.body.detail).toMatch(/duplicate/i);

      const specialist = await t.http
        .put(path())
        .set(bearer(admin.key))
        .send({ items: [allow('kyc', 'get_status', 'bot-a'), allow('kyc', 'get_status', 'bot-a')] });
      expectProblem(specialist, 400, 'VALIDATION_FAILED');
      expect(specialist.body.detail).toContain('items[1]');
      await unchanged();
    });

    it('a token pasted as a toolName or action is not repeated; the position is named, with the catalog\'s actions', async () => {
      const SHOPIFY_TOKEN = 'shpat_0123456789abcdef0123456789abcdef';
      for (const item of [allow(SHOPIFY_TOKEN, 'lookup'), allow('order_lookup', SHOPIFY_TOKEN)]) {
        const res = await t.http.put(path()).set(bearer(admin.key)).send({ items: [allow('kyc', 'get_status'), item, item] });
        expectProblem(res, 400, 'VALIDATION_FAILED');
        expect(res.body.detail).toMatch(/items\[1\]: its toolName\.action \(not named here.*\) is not in the tool catalog \(it has: .*order_lookup\.lookup/);
        expect(res.body.detail).toContain('items[2]: duplicate entry for that toolName.action');
        expect(JSON.stringify(res.body)).not.toContain(SHOPIFY_TOKEN);
      }
      await unchanged();
    });

    it('malformed entries and bodies', async () => {
      const cases: [unknown, string][] = [
        [{ items: [{ toolName: 'order_lookup', action: 'lookup', specialistId: null }] }, 'enabled'],
        [{ items: [{ ...allow('order_lookup', 'lookup'), enabled: 'yes' }] }, 'enabled'],
        [{ items: [allow('order_lookup', 'lookup', 'has spaces')] }, 'specialistId'],
        [{ items: [allow('order_lookup', 'lookup', 'x'.repeat(500))] }, 'specialistId'],
        [{ items: [{ ...allow('order_lookup', 'lookup'), priority: 1 }] }, 'priority'],
        [{ items: [allow('order_lookup', 'lookup')], replace: true }, 'replace'],
        [{ items: 'order_lookup.lookup' }, 'items'],
        [{}, 'items'],
        [{ items: [[allow('order_lookup', 'lookup')]] }, 'each value in items must be an object'],
      ];
      for (const [body, field] of cases) {
        const res = await t.http.put(path()).set(bearer(admin.key)).send(body as object);
        expectProblem(res, 400, 'VALIDATION_FAILED');
        expect(res.body.detail, JSON.stringify(body).slice(0, 120)).toContain(field);
      }
      await unchanged();
    });
  });

  it('lets ops read but not write (403), and refuses experts and agents', async () => {
    await putPermissions(t, org, admin.key, [allow('order_lookup', 'lookup')]);
    const read = await t.http.get(path()).set(bearer(ops.key));
    expect(read.status).toBe(200);
    expect(read.body).toEqual({ items: [allow('order_lookup', 'lookup')] });

    const write = await t.http.put(path()).set(bearer(ops.key)).send({ items: [] });
    expectProblem(write, 403, 'FORBIDDEN');
    for (const role of ['agent', 'expert']) {
      const { key } = await createKey(t, org, role);
      expectProblem(await t.http.get(path()).set(bearer(key)), 403, 'FORBIDDEN');
      expectProblem(await t.http.put(path()).set(bearer(key)).send({ items: [] }), 403, 'FORBIDDEN');
    }
    expect((await t.http.get(path()).set(bearer(admin.key))).body).toEqual({ items: [allow('order_lookup', 'lookup')] });
    expectProblem(await t.http.get(path()), 401, 'UNAUTHENTICATED');
  });

  it("hides another org's permissions: 404, the same as an org that does not exist", async () => {
    const other = await createOrg(t, 'Other Co');
    const otherAdmin = await createKey(t, other, 'admin');
    const otherOps = await createKey(t, other, 'ops');
    const foreignGet = await t.http.get(path()).set(bearer(otherAdmin.key));
    expectProblem(foreignGet, 404, 'NOT_FOUND');
    const missing = await t.http.get(`/v1/orgs/${randomUUID()}/tool-permissions`).set(adminAuth);
    expectProblem(missing, 404, 'NOT_FOUND');
    expect(withoutCorrelation(foreignGet.body)).toEqual(withoutCorrelation(missing.body));
    expectProblem(await t.http.get(path()).set(bearer(otherOps.key)), 404, 'NOT_FOUND');

    const foreignPut = await t.http.put(path()).set(bearer(otherAdmin.key)).send({ items: [] });
    expectProblem(foreignPut, 404, 'NOT_FOUND');
    expect((await t.http.get(path()).set(bearer(admin.key))).body.items).toHaveLength(1);
    expectProblem(await t.http.get('/v1/orgs/not-a-uuid/tool-permissions').set(adminAuth), 404, 'NOT_FOUND');
  });

  it('lets the platform admin manage any org', async () => {
    await putPermissions(t, org, (await createKey(t, null, 'admin')).key, [allow('kyc', 'get_status')]);
    expect((await t.http.get(path()).set(adminAuth)).body).toEqual({ items: [allow('kyc', 'get_status')] });
  });

  describe('specialist precedence, seen through the run manifests', () => {
    let agent: string;

    beforeAll(async () => {
      agent = (await createKey(t, org, 'agent')).key;
    });

    it('a specialist row disabling an org-wide enabled action removes it for that specialist only', async () => {
      await putPermissions(t, org, admin.key, [allow('order_lookup', 'lookup'), allow('kyc', 'get_status'), deny('order_lookup', 'lookup', 'returns-bot')]);
      expect(await allowedToolsOf(t, agent, 'returns-bot')).toEqual(['kyc.get_status']);
      expect(await allowedToolsOf(t, agent, 'support-bot')).toEqual(['kyc.get_status', 'order_lookup.lookup']);
    });

    it('a specialist row enabling an action disabled or absent org-wide grants it to that specialist only', async () => {
      await putPermissions(t, org, admin.key, [
        deny('shopify_refund', 'create'),
        allow('shopify_refund', 'create', 'refund-bot'),
        allow('shopify_query', 'get_product', 'refund-bot'),
        allow('order_lookup', 'lookup'),
      ]);
      expect(await allowedToolsOf(t, agent, 'refund-bot')).toEqual(['order_lookup.lookup', 'shopify_query.get_product', 'shopify_refund.create']);
      expect(await allowedToolsOf(t, agent, 'support-bot')).toEqual(['order_lookup.lookup']);
      // Specialist ids are matched exactly.
      expect(await allowedToolsOf(t, agent, 'Refund-Bot')).toEqual(['order_lookup.lookup']);
    });

    it('disabled rows grant nothing and an empty set grants nothing', async () => {
      await putPermissions(t, org, admin.key, [deny('order_lookup', 'lookup'), deny('kyc', 'get_status', 'support-bot')]);
      expect(await allowedToolsOf(t, agent, 'support-bot')).toEqual([]);
      await putPermissions(t, org, admin.key, []);
      expect(await allowedToolsOf(t, agent, 'support-bot')).toEqual([]);
    });

    it("never leaks another org's permissions into a manifest", async () => {
      const other = await createOrg(t, 'Leak Co');
      const otherAgent = (await createKey(t, other, 'agent')).key;
      await putPermissions(t, org, admin.key, [allow('order_lookup', 'lookup'), allow('kyc', 'get_status', 'support-bot')]);
      expect(await allowedToolsOf(t, otherAgent, 'support-bot')).toEqual([]);
      expect(await allowedToolsOf(t, agent, 'support-bot')).toEqual(['kyc.get_status', 'order_lookup.lookup']);
    });
  });
});
