import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { allow, deny, eventsOf, type PermissionItem } from './governance.helpers.js';

/**
 * PUT /v1/orgs/:orgId/tool-permissions replaces the whole set, so its tool_permissions.changed event must say
 * what changed (added / removed / changed rows): otherwise the ledger cannot tell who granted an action, or when.
 */
describe('tool permissions: the tool_permissions.changed event records what changed', () => {
  let t: TestApp;
  const put = (org: string, items: PermissionItem[]) => t.http.put(`/v1/orgs/${org}/tool-permissions`).set(adminAuth).send({ items });
  const changes = async (org: string) => (await eventsOf(t, org, 'tool_permissions.changed')).map((e) => e.metadata);

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('replacing a read-only grant with a refund grant names the one removed and the one added', async () => {
    const org = await createOrg(t, 'Audit Diff Co');
    const one = await put(org, [allow('order_lookup', 'lookup')]);
    expect(one.status).toBe(200);
    const two = await put(org, [allow('shopify_refund', 'create')]);
    expect(two.status).toBe(200);
    const [first, second] = await changes(org);
    // setTag: the whole set the PUT left, as its ETag (which ledger verify holds the rows to).
    const tagOf = (res: { headers: Record<string, string> }) => JSON.parse(res.headers.etag!) as string;
    expect(first).toEqual({
      count: 1,
      enabled: 1,
      setTag: tagOf(one),
      added: [{ toolName: 'order_lookup', action: 'lookup', specialistId: null, enabled: true }],
      removed: [],
      changed: [],
    });
    expect(second).toEqual({
      count: 1,
      enabled: 1,
      setTag: tagOf(two),
      added: [{ toolName: 'shopify_refund', action: 'create', specialistId: null, enabled: true }],
      removed: [{ toolName: 'order_lookup', action: 'lookup', specialistId: null, enabled: true }],
      changed: [],
    });
  });

  it('a row whose enabled flips is changed (from/to); the same set again records nothing added, removed or changed', async () => {
    const org = await createOrg(t, 'Audit Same Co');
    const set = [allow('kyc', 'get_status'), deny('kyc', 'get_status', 'kyc-bot'), allow('order_lookup', 'lookup')];
    expect((await put(org, set)).status).toBe(200);
    expect((await put(org, set)).status).toBe(200);
    // Only the specialist's deny becomes an allow; the org-wide row of the same action stays as it was.
    expect((await put(org, [allow('kyc', 'get_status'), allow('kyc', 'get_status', 'kyc-bot'), allow('order_lookup', 'lookup')])).status).toBe(200);
    const [, same, flipped] = await changes(org);
    expect(same).toEqual({ count: 3, enabled: 2, setTag: expect.any(String), added: [], removed: [], changed: [] });
    expect(flipped).toEqual({
      count: 3,
      enabled: 3,
      setTag: expect.any(String),
      added: [],
      removed: [],
      changed: [{ toolName: 'kyc', action: 'get_status', specialistId: 'kyc-bot', from: false, to: true }],
    });
  });

  it('two admins’ concurrent PUTs: the later event diffs against the set the earlier one wrote', async () => {
    const org = await createOrg(t, 'Audit Race Co');
    const base = [allow('order_lookup', 'lookup')];
    const setA = [allow('shopify_refund', 'create', 'refund-bot')];
    const setB = [allow('kyc', 'get_status', 'kyc-bot')];
    expect((await put(org, base)).status).toBe(200);
    // Hold the org's permissions lock (the one the service takes) so both PUTs are in flight at once, then let go.
    const holder = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
    let released = false;
    try {
      await holder.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [`perm:${org}`]);
      const a = put(org, setA).then((r) => r);
      const b = put(org, setB).then((r) => r);
      await waitFor(async () => {
        const [{ n }] = (await holder.query(
          `SELECT count(*)::int AS n FROM pg_locks w JOIN pg_locks h
             ON h.pid = pg_backend_pid() AND h.locktype = 'advisory' AND h.granted
            AND w.database = h.database AND w.classid = h.classid AND w.objid = h.objid AND w.objsubid = h.objsubid
           WHERE w.locktype = 'advisory' AND NOT w.granted`,
        )).rows as [{ n: number }];
        return n === 2;
      }, 'both PUTs waiting on the org permissions lock');
      await holder.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [`perm:${org}`]);
      released = true;
      expect([(await a).status, (await b).status]).toEqual([200, 200]);
    } finally {
      if (!released) await holder.query('SELECT pg_advisory_unlock_all()');
      await holder.end();
    }
    const [, earlier, later] = (await changes(org)) as { added: PermissionItem[]; removed: PermissionItem[] }[];
    // Either may win the lock; the earlier replaced the base set, the later replaced the earlier's.
    expect(earlier.removed).toEqual(base);
    expect([setA, setB]).toContainEqual(earlier.added);
    expect(later.removed).toEqual(earlier.added);
    expect(later.added).toEqual(earlier.added[0].specialistId === 'refund-bot' ? setB : setA);
    expect((await t.http.get(`/v1/orgs/${org}/tool-permissions`).set(adminAuth)).body).toEqual({ items: later.added });
  });
});
