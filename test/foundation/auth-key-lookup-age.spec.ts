import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DataSource, EntityTarget, ObjectLiteral } from 'typeorm';
import { ApiKeyEntity } from '../../src/auth/api-key.entity.js';
import { ApiKeysService } from '../../src/auth/api-keys.service.js';
import { createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * README "What is cached": a revoked key can still read on another replica for up to 5 s. Requests presenting one key
 * share its lookup in flight, and a revocation on this replica starts a new generation of lookups; one on another
 * replica does not. A lookup that read the key before such a revocation and then stalled (a slow network, a stuck
 * connection) was joined by every later request, however late (cross-replica coherence review: a read served 6.2 s
 * after the revocation). A request no longer joins a lookup begun more than the cache's 5 s ago.
 */
describe('an API key lookup in flight is not joined past the cache lifetime', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  /** The service's next api_keys lookup reads its row at once and hands it back only when `release` is called. */
  function stallNextLookup(svc: { ds: DataSource }): { read: Promise<void>; release: () => void; restore: () => void } {
    const real = svc.ds;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let wasRead!: () => void;
    const read = new Promise<void>((r) => (wasRead = r));
    let armed = true;
    svc.ds = new Proxy(real, {
      get(target, prop) {
        if (prop !== 'getRepository') return Reflect.get(target, prop) as unknown;
        return (e: EntityTarget<ObjectLiteral>) => {
          const repo = target.getRepository(e);
          if (e !== ApiKeyEntity) return repo;
          return new Proxy(repo, {
            get(r, p) {
              if (p !== 'findOne') return Reflect.get(r, p, r) as unknown;
              return async (...args: unknown[]) => {
                const found = (await (r.findOne as (...a: unknown[]) => Promise<unknown>)(...args)) as unknown;
                if (armed) {
                  armed = false;
                  wasRead();
                  await gate;
                }
                return found;
              };
            },
          });
        };
      },
    });
    return { read, release, restore: () => (svc.ds = real) };
  }

  it('a request 5.2 s after another replica revoked the key starts its own lookup and is refused', async () => {
    const org = await createOrg(t, 'Stalled Lookup Co');
    const key = await createKey(t, org, 'ops'); // never presented yet: no cache entry
    const svc = t.app.get(ApiKeysService, { strict: false });
    // And a key found live and cached here: its entry lapses after the cache's 5 s like the lookup (an entry kept
    // for good accepted a key revoked on another replica for as long as the process lived).
    const cached = await createKey(t, org, 'ops');
    expect(await svc.authenticate(cached.key)).toMatchObject({ keyId: cached.id });
    const stall = stallNextLookup(svc as unknown as { ds: DataSource });
    try {
      const first = svc.authenticate(key.key);
      await stall.read; // the lookup read the key while it was live
      await t.ds.query('UPDATE api_keys SET revoked_at = now() WHERE id = ANY($1)', [[key.id, cached.id]]); // another replica's revocation
      expect(await svc.authenticate(cached.key)).toMatchObject({ keyId: cached.id }); // within the 5 s: still cached
      await sleep(5_200);
      const late = svc.authenticate(key.key);
      await sleep(100);
      stall.release();
      expect(await first).toMatchObject({ keyId: key.id }); // it asked before the revocation: answered as it read
      expect(await late).toBeNull();
      expect(await svc.authenticate(cached.key)).toBeNull();
    } finally {
      stall.release();
      stall.restore();
    }
  }, 30_000);

  it('a request while the lookup is young still joins it: one database read for both', async () => {
    const org = await createOrg(t, 'Young Lookup Co');
    const key = await createKey(t, org, 'ops');
    const svc = t.app.get(ApiKeysService, { strict: false });
    const stall = stallNextLookup(svc as unknown as { ds: DataSource });
    const holder = svc as unknown as { ds: DataSource };
    const real = holder.ds;
    let reads = 0;
    holder.ds = new Proxy(real, {
      get(target, prop) {
        if (prop === 'getRepository') reads++;
        return Reflect.get(target, prop) as unknown;
      },
    });
    try {
      const first = svc.authenticate(key.key);
      await stall.read;
      const second = svc.authenticate(key.key);
      stall.release();
      expect(await first).toMatchObject({ keyId: key.id });
      expect(await second).toMatchObject({ keyId: key.id });
      expect(reads).toBe(1);
    } finally {
      stall.release();
      stall.restore();
    }
  });
});
