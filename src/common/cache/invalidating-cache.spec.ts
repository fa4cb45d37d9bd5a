import { describe, expect, it } from 'vitest';
import { InvalidatingCache } from './invalidating-cache.js';

/** A load the test finishes by hand. */
function deferred<T>(): { promise: Promise<T>; resolve(v: T): void; reject(e: unknown): void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('InvalidatingCache', () => {
  const make = (opts: { cacheable?: (v: string | null) => boolean } = {}) => {
    let clock = 0;
    const cache = new InvalidatingCache<string, string | null>({ ttlMs: 1_000, now: () => clock, ...opts });
    return { cache, tick: (ms: number) => void (clock += ms) };
  };

  it('serves a stored value until the TTL (counted from the read start) runs out', async () => {
    const { cache, tick } = make();
    let loads = 0;
    const load = async () => `v${++loads}`;
    expect(await cache.get('k', load)).toBe('v1');
    tick(999);
    expect(await cache.get('k', load)).toBe('v1');
    tick(1);
    expect(await cache.get('k', load)).toBe('v2');
  });

  it('shares one in-flight load between concurrent misses', async () => {
    const { cache } = make();
    const d = deferred<string>();
    let loads = 0;
    const load = () => (loads++, d.promise);
    const a = cache.get('k', load);
    const b = cache.get('k', load);
    d.resolve('v');
    expect([await a, await b]).toEqual(['v', 'v']);
    expect(loads).toBe(1);
  });

  it('does not store a load that was in flight when the key was invalidated', async () => {
    const { cache } = make();
    const old = deferred<string>();
    const before = cache.get('k', () => old.promise); // read began before the write committed
    cache.invalidate('k'); // the write committed
    old.resolve('stale');
    expect(await before).toBe('stale'); // its own caller was concurrent with the write
    expect(await cache.get('k', async () => 'fresh')).toBe('fresh');
  });

  it('does not hand a load that began before an invalidation to a caller arriving after it', async () => {
    const { cache } = make();
    const old = deferred<string>();
    const before = cache.get('k', () => old.promise);
    cache.invalidate('k');
    const after = cache.get('k', async () => 'fresh');
    expect(await after).toBe('fresh');
    old.resolve('stale'); // finishes last: must not overwrite the fresh value
    await before;
    expect(await cache.get('k', async () => 'reloaded')).toBe('fresh');
  });

  it('a stale load finishing does not evict the current generation\'s in-flight load', async () => {
    const { cache } = make();
    const old = deferred<string>();
    const cur = deferred<string>();
    void cache.get('k', () => old.promise);
    cache.invalidate('k');
    const a = cache.get('k', () => cur.promise);
    old.resolve('stale');
    await Promise.resolve();
    let joinedLoads = 0;
    const b = cache.get('k', async () => (joinedLoads++, 'other'));
    cur.resolve('fresh');
    expect([await a, await b]).toEqual(['fresh', 'fresh']);
    expect(joinedLoads).toBe(0);
  });

  it('clear() disowns every in-flight load', async () => {
    const { cache } = make();
    const old = deferred<string>();
    const before = cache.get('k', () => old.promise);
    cache.clear();
    old.resolve('stale');
    await before;
    expect(await cache.get('k', async () => 'fresh')).toBe('fresh');
  });

  it('hands back but does not store values that are not cacheable, and does not cache failures', async () => {
    const { cache } = make({ cacheable: (v) => v !== null });
    expect(await cache.get('k', async () => null)).toBeNull();
    expect(await cache.get('k', async () => 'v')).toBe('v');
    const { cache: c2 } = make();
    await expect(c2.get('k', () => Promise.reject(new Error('db down')))).rejects.toThrow('db down');
    await expect(c2.get('k', () => { throw new Error('sync'); })).rejects.toThrow('sync');
    expect(await c2.get('k', async () => 'ok')).toBe('ok');
  });
});

describe('InvalidatingCache: joining a load in flight', () => {
  it('a caller arriving more than ttlMs after a load started does not join it (what the database said then is stale)', async () => {
    let clock = 0;
    const cache = new InvalidatingCache<string, string>({ ttlMs: 1_000, now: () => clock });
    const answers: ((v: string) => void)[] = [];
    let loads = 0;
    const load = () => (loads++, new Promise<string>((r) => answers.push(r)));
    const first = cache.get('org', load); // the database answers "enabled" as of t=0, but the reply is slow
    clock = 500;
    const young = cache.get('org', load); // within the bound: joins
    expect(loads).toBe(1);
    clock = 5_000; // the flag was turned off on another replica meanwhile; this caller comes 5 s after the ask
    const late = cache.get('org', load);
    expect(loads).toBe(2);
    answers[0]!('enabled-as-of-t0');
    answers[1]!('disabled');
    expect([await first, await young, await late]).toEqual(['enabled-as-of-t0', 'enabled-as-of-t0', 'disabled']);
    // The stale flight's answer is not cached over the fresh one.
    expect(await cache.get('org', load)).toBe('disabled');
    expect(loads).toBe(2);
  });
});

describe('InvalidatingCache: at its bound', () => {
  it('drops the entry stored longest ago, not every entry: the newer ones stay cached', async () => {
    const cache = new InvalidatingCache<string, string>({ ttlMs: 60_000, maxEntries: 3, now: () => 0 });
    let loads = 0;
    const load = (k: string) => async () => (loads++, k);
    await cache.get('hot', load('hot'));
    for (let i = 0; i < 9; i++) await cache.get(`cold${i}`, load(`cold${i}`));
    const before = loads;
    for (const k of ['cold8', 'cold7', 'cold6']) await cache.get(k, load(k));
    // The three newest are all still there (a cache emptied at its bound held only the last one stored).
    expect(loads - before).toBe(0);
  });
});
