import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiKeyEntity } from '../../src/auth/api-key.entity.js';
import { ApiKeysService } from '../../src/auth/api-keys.service.js';
import { Clock } from '../../src/common/clock.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
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
    const t0 = h.t.app.get(Clock).nowMs(); // the gateway's time (the database's, as the Clock reads it): what uses are stamped with
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
    expect(after[0].last_used_at!.getTime()).toBeGreaterThanOrEqual(Math.floor(t0));
  });

  it('lastUsedAt is the time of the use, not of the flush: a key used, then revoked, lists lastUsedAt before revokedAt', async () => {
    const org = await createOrg(h.t);
    const k = await createKey(h.t, org, 'ops');
    const clock = h.t.app.get(Clock); // what uses are stamped with: the database's time as the gateway reads it
    const before = Math.floor(clock.nowMs());
    expect((await h.t.http.get(`/v1/orgs/${org}`).set(bearer(k.key))).status).toBe(200); // its only use
    const after = Math.ceil(clock.nowMs());
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

  it('a write after a revoke committed on another replica is 401, even while a read of the same key, begun before, is still being looked up', async () => {
    // API.md: a revocation "takes effect at once on every replica for writes": the write looks the key up afresh, never joining the read's lookup.
    const org = await createOrg(h.t, 'flight');
    const k = await createKey(h.t, org, 'admin');
    const repo = h.t.ds.getRepository(ApiKeyEntity);
    const realFindOne = repo.findOne.bind(repo);
    let read!: () => void;
    const readDone = new Promise<void>((r) => (read = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let held = false;
    // The GET's key lookup: the database read happens now, its answer comes back later (a slow round trip).
    repo.findOne = (async (...args: Parameters<typeof repo.findOne>) => {
      const row = await realFindOne(...args);
      if (!held) {
        held = true;
        read();
        await released;
      }
      return row;
    }) as typeof repo.findOne;
    try {
      const get = h.t.http.get(`/v1/orgs/${org}/feature-flags`).set(bearer(k.key)).then((r) => r);
      await readDone;
      // Revoked on another replica: committed in the database; this replica's cache is not told.
      await h.t.ds.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [k.id]);
      const put = h.t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(bearer(k.key)).send({ enabled: true }).then((r) => r);
      await sleep(200); // the PUT reaches the guard while the GET's lookup is still in flight
      release();
      const [, putRes] = await Promise.all([get, put]);
      const [flag] = (await h.t.ds.query(`SELECT enabled FROM feature_flags WHERE org_id = $1 AND flag = 'tool_calling_enabled'`, [org])) as { enabled: boolean }[];
      expect({ status: putRes.status, flagWritten: flag?.enabled ?? null }).toEqual({ status: 401, flagWritten: null });
    } finally {
      repo.findOne = realFindOne;
      release();
    }
  });

  it('a tool call refused 401 (its key revoked on another replica, still cached here) is no use: lastUsedAt stays at or before revokedAt, and the key leaves the cache', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const svc = h.t.app.get(ApiKeysService, { strict: false });
    const flush = () => (svc as unknown as { flushLastUsed: () => Promise<void> }).flushLastUsed();
    expect((await h.t.http.get(`/v1/runs/${org.runId}/tools`).set(bearer(org.agentKey))).status).toBe(200); // cached as valid here
    await flush();
    // Revoked by another replica (the row only), a moment ago.
    const [{ id }] = (await h.t.ds.query(`SELECT id FROM api_keys WHERE key_prefix = $1`, [org.agentKey.slice(0, 10)])) as { id: string }[];
    await h.t.ds.query(`UPDATE api_keys SET revoked_at = now() WHERE id = $1`, [id]);
    await sleep(50);
    // Let in from the cache; refused by the intent statement, which re-checks the key.
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '1001' }));
    expect(res.status).toBe(401);
    await flush();
    const [row] = (await h.t.ds.query(`SELECT last_used_at, revoked_at FROM api_keys WHERE id = $1`, [id])) as { last_used_at: Date; revoked_at: Date }[];
    expect(row.last_used_at.getTime()).toBeLessThanOrEqual(row.revoked_at.getTime());
    // Dropped from the cache: a read (which the cache may answer) is refused now, not for another 5 s.
    expect((await h.t.http.get(`/v1/runs/${org.runId}/tools`).set(bearer(org.agentKey))).status).toBe(401);
  });
});
