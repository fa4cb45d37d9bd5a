import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeyEntity } from '../../src/auth/api-key.entity.js';
import { ApiKeysService } from '../../src/auth/api-keys.service.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey, createOrg } from '../support/test-app.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Unknown keys are cached as negative entries in the same map as valid principals, and the map is dropped
 * whole past 50,000 entries: unauthenticated junk (no rate limit applies before a key is known) evicts every
 * valid key's entry, so each valid key goes back to the database.
 */
describe('the API key cache under a flood of unknown keys', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('50,001 unknown keys do not evict a valid key that is in active use', async () => {
    const { agentKey } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const svc = h.t.app.get(ApiKeysService, { strict: false });
    expect(await svc.authenticate(agentKey)).not.toBeNull(); // cached now
    const holder = svc as unknown as { ds: { getRepository(e: unknown): unknown } };
    const real = holder.ds;
    let dbReads = 0;
    holder.ds = new Proxy(real, {
      get(t, p) {
        if (p === 'getRepository') {
          return (e: unknown) => {
            const repo = (t as typeof real).getRepository(e) as { findOne(o: unknown): Promise<unknown> };
            if (e !== ApiKeyEntity) return repo;
            return { findOne: (o: { where: { keyHash: Buffer } }) => (dbReads++, o.where.keyHash.length === 32 && !junk ? repo.findOne(o) : Promise.resolve(null)) };
          };
        }
        return Reflect.get(t, p, t) as unknown;
      },
    }) as typeof real;
    let junk = true;
    try {
      for (let i = 0; i < 50_001; i++) await svc.authenticate(`tgw_${randomBytes(16).toString('hex')}`);
      junk = false;
      const readsBefore = dbReads;
      expect(await svc.authenticate(agentKey)).not.toBeNull();
      expect(dbReads - readsBefore).toBe(0); // still cached: junk must not flush valid principals
    } finally {
      holder.ds = real;
    }
  }, 60_000);

  it('a lastUsedAt flush that fails (a database blip) keeps its keys for the next flush instead of losing them', async () => {
    const { agentKey } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const svc = h.t.app.get(ApiKeysService, { strict: false });
    const [{ t0 }] = (await h.t.ds.query('SELECT now() AS t0')) as [{ t0: Date }];
    const principal = await svc.authenticate(agentKey); // a use to record
    expect(principal).not.toBeNull();
    const holder = svc as unknown as { ds: { query: (sql: string, params?: unknown[]) => Promise<unknown> }; flushLastUsed: () => Promise<void> };
    const real = holder.ds;
    holder.ds = new Proxy(real, {
      get(t, p) {
        if (p === 'query') return async () => Promise.reject(new Error('connection terminated'));
        return Reflect.get(t, p, t) as unknown;
      },
    }) as typeof real;
    try {
      await holder.flushLastUsed(); // fails: nothing written
    } finally {
      holder.ds = real;
    }
    await holder.flushLastUsed(); // the next one writes what the failed one held
    const after = (await h.t.ds.query('SELECT last_used_at FROM api_keys WHERE id = $1', [principal!.keyId])) as { last_used_at: Date | null }[];
    // Recorded after the use (lost, it would still be null or an earlier flush's time).
    expect(after[0].last_used_at!.getTime()).toBeGreaterThanOrEqual(t0.getTime());
  });

  it('lastUsedAt is the time of the use, not of the flush: a key used, then revoked, lists lastUsedAt before revokedAt', async () => {
    const org = await createOrg(h.t);
    const k = await createKey(h.t, org, 'ops');
    const before = Date.now();
    expect((await h.t.http.get(`/v1/orgs/${org}`).set(bearer(k.key))).status).toBe(200); // its only use
    const after = Date.now();
    await sleep(50);
    expect((await h.t.http.delete(`/v1/api-keys/${k.id}`).set(adminAuth)).status).toBe(204);
    await sleep(50);
    const listed = await h.t.http.get('/v1/api-keys').query({ orgId: org }).set(adminAuth); // flushes first
    const row = (listed.body.items as { id: string; revokedAt: string; lastUsedAt: string }[]).find((i) => i.id === k.id)!;
    const usedAt = Date.parse(row.lastUsedAt);
    expect(usedAt).toBeGreaterThanOrEqual(before);
    expect(usedAt).toBeLessThanOrEqual(after);
    expect(usedAt).toBeLessThan(Date.parse(row.revokedAt));
  });

  it('a flush never moves lastUsedAt back past a later use another replica recorded', async () => {
    const org = await createOrg(h.t);
    const k = await createKey(h.t, org, 'ops');
    const svc = h.t.app.get(ApiKeysService, { strict: false });
    expect(await svc.authenticate(k.key)).not.toBeNull(); // a use here, now
    const later = new Date(Date.now() + 60_000); // a use elsewhere, flushed there first
    await h.t.ds.query('UPDATE api_keys SET last_used_at = $2 WHERE id = $1', [k.id, later]);
    await (svc as unknown as { flushLastUsed: () => Promise<void> }).flushLastUsed();
    const [row] = (await h.t.ds.query('SELECT last_used_at FROM api_keys WHERE id = $1', [k.id])) as { last_used_at: Date }[];
    expect(row.last_used_at.getTime()).toBe(later.getTime());
  });

  it('a repeat DELETE of a key revoked elsewhere (204) drops it from this replica\'s cache: the next request is 401', async () => {
    const org = await createOrg(h.t);
    const k = await createKey(h.t, org, 'ops');
    expect((await h.t.http.get(`/v1/orgs/${org}`).set(bearer(k.key))).status).toBe(200); // cached as valid here
    // Revoked by another replica: the row only, this replica's cache is not told.
    await h.t.ds.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [k.id]);
    expect((await h.t.http.delete(`/v1/api-keys/${k.id}`).set(adminAuth)).status).toBe(204);
    expect((await h.t.http.get(`/v1/orgs/${org}`).set(bearer(k.key))).status).toBe(401);
  });
});
