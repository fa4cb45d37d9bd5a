import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

interface KeyItem {
  id: string;
  orgId: string | null;
  role: string;
  name: string;
  createdAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
}
interface Page {
  items: KeyItem[];
  nextCursor: string | null;
}

/**
 * GET /v1/api-keys is keyset-paginated like the ledger listings: newest first
 * (created_at, id), `limit` 1–200 (default 200), a signed `nextCursor` bound to
 * the listing and its scope. The database is shared with other test files, so
 * the platform-wide listing is checked on this file's own keys.
 */
describe('GET /v1/api-keys: keyset pages and signed cursors', () => {
  let t: TestApp;

  /** Inserts `n` agent keys of `orgId` straight into the table (setup only), created_at from `createdAt(g)` (g = 1..n). */
  async function bulkKeys(orgId: string, n: number, createdAt: string): Promise<void> {
    await t.ds.query(
      `INSERT INTO api_keys (id, org_id, role, name, key_hash, key_prefix, created_at)
       SELECT gen_random_uuid(), $1, 'agent', 'bulk ' || g,
              decode(replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', ''), 'hex'),
              'tgw_bulk', ${createdAt}
         FROM generate_series(1, $2::int) g`,
      [orgId, n],
    );
  }

  /** The ids of one org's keys in the listing's order, from the table itself. */
  async function expectedOrder(orgId: string): Promise<string[]> {
    const rows = (await t.ds.query('SELECT id FROM api_keys WHERE org_id = $1 ORDER BY created_at DESC, id DESC', [orgId])) as { id: string }[];
    return rows.map((r) => r.id);
  }

  /** Every page, following nextCursor; fails on anything but 200. */
  async function walk(auth: Record<string, string>, query: Record<string, string>): Promise<{ ids: string[]; pages: Page[] }> {
    const pages: Page[] = [];
    let cursor: string | null = null;
    do {
      const res = await t.http.get('/v1/api-keys').query({ ...query, ...(cursor ? { cursor } : {}) }).set(auth);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const page = res.body as Page;
      expect(page.nextCursor === null || typeof page.nextCursor === 'string').toBe(true);
      pages.push(page);
      cursor = page.nextCursor;
      expect(pages.length, 'runaway pagination').toBeLessThan(1_000);
    } while (cursor);
    return { ids: pages.flatMap((p) => p.items.map((i) => i.id)), pages };
  }

  const countOf = (ids: string[]): Map<string, number> => {
    const m = new Map<string, number>();
    for (const id of ids) m.set(id, (m.get(id) ?? 0) + 1);
    return m;
  };

  beforeAll(async () => {
    t = await startTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('platform admin, no orgId: walking every page finds each key exactly once, the one created last on the first page (not cut at 1000)', async () => {
    const org = await createOrg(t, 'many keys');
    await bulkKeys(org, 1_100, `now() - interval '1 day' + g * interval '1 millisecond'`);
    const fresh = await createKey(t, org, 'agent');

    const first = await t.http.get('/v1/api-keys').set(adminAuth);
    expect(first.status).toBe(200);
    const firstPage = first.body as Page;
    expect(firstPage.items.length).toBe(200); // default page size
    expect(typeof firstPage.nextCursor).toBe('string');
    // Newest first: a key just created is on the first page, to audit or revoke. (Not necessarily its first item: keys
    // are stamped on the gateway's Clock, and specs before this one in the shared database moved theirs ahead.)
    expect(firstPage.items.map((i) => i.id)).toContain(fresh.id);

    const { ids, pages } = await walk(adminAuth, {});
    expect(pages.length).toBeGreaterThan(5);
    const counts = countOf(ids);
    expect([...counts.values()].every((c) => c === 1), 'no key twice').toBe(true);
    const mine = await expectedOrder(org);
    expect(mine.length).toBe(1_101);
    expect(mine.filter((id) => counts.get(id) !== 1)).toEqual([]);
    expect(counts.get(fresh.id)).toBe(1);
    // newest first across page boundaries
    const created = pages.flatMap((p) => p.items.map((i) => Date.parse(i.createdAt)));
    for (let i = 1; i < created.length; i++) expect(created[i]).toBeLessThanOrEqual(created[i - 1]);
    // the walk is the same listing as the table's (created_at DESC, id DESC) for this org, in order
    expect(ids.filter((id) => mine.includes(id))).toEqual(mine);
  });

  it('per org: pages follow (created_at DESC, id DESC) exactly, through equal timestamps and 1 µs gaps, for platform and org admins', async () => {
    const org = await createOrg(t, 'ties');
    // 5 groups of 4 keys sharing one created_at to the microsecond, the groups 1 µs apart, plus 3 more each 1 µs apart
    await bulkKeys(org, 20, `timestamptz '2026-01-02 03:04:05.000100+00' + ((g - 1) / 4) * interval '1 microsecond'`);
    await bulkKeys(org, 3, `timestamptz '2026-01-02 03:04:05.000200+00' + g * interval '1 microsecond'`);
    const orgAdmin = await createKey(t, org, 'admin');
    const expected = await expectedOrder(org);
    expect(expected.length).toBe(24);
    expect(expected[0]).toBe(orgAdmin.id);

    for (const limit of ['1', '3', '4', '7', '23', '24', '200']) {
      const byPlatform = await walk(adminAuth, { orgId: org, limit });
      expect(byPlatform.ids, `platform admin, limit ${limit}`).toEqual(expected);
      expect(byPlatform.pages.length).toBe(Math.ceil(24 / Number(limit)));
      for (const p of byPlatform.pages.slice(0, -1)) expect(p.items.length).toBe(Number(limit));
      const byOrgAdmin = await walk(bearer(orgAdmin.key), { limit });
      expect(byOrgAdmin.ids, `org admin, limit ${limit}`).toEqual(expected);
    }
    // a page that ends exactly at the last key says so: no cursor to an empty page
    const exact = await t.http.get('/v1/api-keys').query({ orgId: org, limit: '24' }).set(adminAuth);
    expect((exact.body as Page).nextCursor).toBeNull();
  });

  it('without limit or cursor an org with few keys gets all of them and nextCursor null (the old response, plus nextCursor)', async () => {
    const org = await createOrg(t, 'few keys');
    const a = await createKey(t, org, 'agent');
    const b = await createKey(t, org, 'ops');
    await t.http.delete(`/v1/api-keys/${a.id}`).set(adminAuth).expect(204);
    const res = await t.http.get(`/v1/api-keys?orgId=${org}`).set(adminAuth);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body as object).sort()).toEqual(['items', 'nextCursor']);
    const page = res.body as Page;
    expect(page.nextCursor).toBeNull();
    expect(page.items.map((k) => k.id)).toEqual([b.id, a.id]);
    expect(page.items[0]).toMatchObject({ orgId: org, role: 'ops', revokedAt: null, lastUsedAt: null });
    expect(page.items[1].revokedAt).toEqual(expect.any(String));
    expect(JSON.stringify(page)).not.toContain(a.key);
  });

  it('orgId=platform pages through the platform keys only', async () => {
    const mine = [await createKey(t, null, 'ops'), await createKey(t, null, 'admin'), await createKey(t, null, 'ops')].map((k) => k.id);
    const { ids, pages } = await walk(adminAuth, { orgId: 'platform', limit: '1' });
    expect(pages.every((p) => p.items.every((k) => k.orgId === null))).toBe(true);
    const counts = countOf(ids);
    expect(mine.map((id) => counts.get(id))).toEqual([1, 1, 1]);
    expect(ids.slice(0, 3)).toEqual([...mine].reverse());
  });

  it('refuses a tampered, foreign or re-scoped cursor with 400 VALIDATION_FAILED; other listings refuse its cursor and it refuses theirs', async () => {
    const orgA = await createOrg(t, 'cursor A');
    const orgB = await createOrg(t, 'cursor B');
    await bulkKeys(orgA, 5, 'now()');
    await bulkKeys(orgB, 5, 'now()');
    const adminA = await createKey(t, orgA, 'admin');
    const adminB = await createKey(t, orgB, 'admin');

    const res = await t.http.get('/v1/api-keys').query({ orgId: orgA, limit: '2' }).set(adminAuth);
    const cursor = (res.body as Page).nextCursor!;
    expect(cursor).toEqual(expect.any(String));
    // the same scope, whoever asks: the platform admin naming org A, or org A's own admin
    expect((await t.http.get('/v1/api-keys').query({ orgId: orgA, limit: '2', cursor }).set(adminAuth)).status).toBe(200);
    expect((await t.http.get('/v1/api-keys').query({ limit: '2', cursor }).set(bearer(adminA.key))).status).toBe(200);

    const [body, sig] = cursor.split('.');
    const payload = JSON.parse(Buffer.from(body, 'base64url').toString()) as Record<string, string>;
    expect(payload.k).toBe('api-keys');
    const forged = `${Buffer.from(JSON.stringify({ ...payload, o: orgB })).toString('base64url')}.${sig}`;
    const flipped = `${body}.${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`;
    const events = await t.http.get('/v1/ledger/events').query({ limit: '1' }).set(adminAuth);
    const eventsCursor = (events.body as Page).nextCursor!;
    expect(eventsCursor).toEqual(expect.any(String));
    const bad: [string, Record<string, string>, Record<string, string>][] = [
      ['forged org', { orgId: orgB, cursor: forged }, adminAuth],
      ['bad signature', { orgId: orgA, cursor: flipped }, adminAuth],
      ['garbage', { orgId: orgA, cursor: 'not-a-cursor' }, adminAuth],
      ['truncated', { orgId: orgA, cursor: cursor.slice(0, -5) }, adminAuth],
      ['other org', { orgId: orgB, cursor }, adminAuth],
      ['every key', { cursor }, adminAuth],
      ['platform keys', { orgId: 'platform', cursor }, adminAuth],
      ['other org’s admin', { cursor }, bearer(adminB.key)],
      ['a ledger-events cursor', { cursor: eventsCursor }, adminAuth],
    ];
    for (const [what, query, auth] of bad) {
      const r = await t.http.get('/v1/api-keys').query({ limit: '2', ...query }).set(auth);
      expect(r.status, what).toBe(400);
      expect(r.body.code, what).toBe('VALIDATION_FAILED');
    }
    // an every-key cursor has the ledger listings' '*' scope and no filters: only its kind tells them apart
    const all = await t.http.get('/v1/api-keys').query({ limit: '1' }).set(adminAuth);
    const allCursor = (all.body as Page).nextCursor!;
    expect((await t.http.get('/v1/ledger/events').query({ cursor: allCursor }).set(adminAuth)).status).toBe(400);
    expect((await t.http.get('/v1/approvals').query({ cursor: allCursor }).set(adminAuth)).status).toBe(400);
  });

  it('validates limit (1–200, a plain integer) with 400 VALIDATION_FAILED', async () => {
    for (const limit of ['0', '201', '-1', 'abc', '1.5', '', '1e2', '0x10']) {
      const r = await t.http.get('/v1/api-keys').query({ limit }).set(adminAuth);
      expect(r.status, `limit=${limit}`).toBe(400);
      expect(r.body.code).toBe('VALIDATION_FAILED');
    }
    expect((await t.http.get('/v1/api-keys').query({ limit: '200' }).set(adminAuth)).status).toBe(200);
    expect((await t.http.get('/v1/api-keys').query({ limit: '1' }).set(adminAuth)).status).toBe(200);
  });

  it('a malformed orgId filter is 400 VALIDATION_FAILED as on the other listings; an unknown org id is 404', async () => {
    for (const orgId of ['not-a-uuid', 'platforms', 'PLATFORM', '12345', `${randomUUID()}x`, '*']) {
      const r = await t.http.get('/v1/api-keys').query({ orgId }).set(adminAuth);
      expect([r.status, r.body.code], `orgId=${orgId}`).toEqual([400, 'VALIDATION_FAILED']);
      const other = await t.http.get('/v1/tool-calls').query({ orgId }).set(adminAuth);
      expect(other.status, `tool-calls orgId=${orgId}`).toBe(400);
    }
    expect((await t.http.get('/v1/api-keys').query({ orgId: randomUUID() }).set(adminAuth)).status).toBe(404);
    expect((await t.http.get('/v1/api-keys').query({ orgId: 'platform' }).set(adminAuth)).status).toBe(200);
    expect((await t.http.get('/v1/api-keys').query({ orgId: randomUUID().toUpperCase() }).set(adminAuth)).status).toBe(404);
  });

  it('OpenAPI documents limit, cursor and nextCursor', async () => {
    type Param = { name: string; in: string; schema?: { minimum?: number; maximum?: number; default?: number } };
    const doc = (await t.http.get('/openapi.json')).body as {
      paths: Record<string, { get: { parameters: Param[]; responses: Record<string, { content?: Record<string, { schema: { properties: Record<string, unknown> } }> }> } }>;
    };
    const op = doc.paths['/v1/api-keys'].get;
    const limit = op.parameters.find((p) => p.name === 'limit' && p.in === 'query');
    expect(limit?.schema).toMatchObject({ minimum: 1, maximum: 200, default: 200 });
    expect(op.parameters.some((p) => p.name === 'cursor' && p.in === 'query')).toBe(true);
    expect(Object.keys(op.responses['200'].content!['application/json'].schema.properties).sort()).toEqual(['items', 'nextCursor']);
    expect(Object.keys(op.responses['400'].content ?? {})).toContain('application/problem+json');
  });
});
