import { describe, expect, it } from 'vitest';
import { REFRESH_RETRY_MIN_MS, TokenCache, TokenFetchError, tokenCacheKey, type FetchedToken } from './token-cache.js';

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets a refresh started in the background settle (its fetch resolves in microtasks). */
const settled = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

/** A fetcher that counts calls and hands out tok-1, tok-2, ... */
function counter(expiresInSec = 3600): { fetcher: () => Promise<FetchedToken>; calls: () => number } {
  let n = 0;
  return {
    fetcher: async () => {
      n += 1;
      await Promise.resolve();
      return { token: `tok-${n}`, expiresInSec };
    },
    calls: () => n,
  };
}

describe('TokenCache', () => {
  it('adds every token it hands out to the call\'s tokensUsed, bought or cached; a refused acquire adds none', async () => {
    const cache = new TokenCache();
    const f = counter(3600);
    const first = new Set<string>();
    const second = new Set<string>();
    expect(await cache.getToken('k', f.fetcher, { tokensUsed: first })).toBe('tok-1');
    expect((await cache.acquire('k', f.fetcher, { tokensUsed: second })).token).toBe('tok-1');
    expect([[...first], [...second]]).toEqual([['tok-1'], ['tok-1']]);
    const refused = new Set<string>();
    const failing = async (): Promise<FetchedToken> => Promise.reject(new Error('token endpoint down'));
    await expect(cache.getToken('other', failing, { tokensUsed: refused })).rejects.toThrow('token endpoint down');
    expect(refused.size).toBe(0);
  });

  it('reuses the token until expiry minus the margin, then refreshes', async () => {
    let now = 1_000_000;
    const cache = new TokenCache({ now: () => now });
    const f = counter(3600);
    expect(await cache.getToken('k', f.fetcher)).toBe('tok-1');
    now += 3_540_000 - 1; // 1 ms before expiresAt - 60 s
    expect(await cache.getToken('k', f.fetcher)).toBe('tok-1');
    expect(f.calls()).toBe(1);
    now += 1;
    // Still valid for 60 s: handed out at once, refreshed behind the call.
    expect(await cache.getToken('k', f.fetcher)).toBe('tok-1');
    expect(f.calls()).toBe(2);
    await settled();
    expect(await cache.getToken('k', f.fetcher)).toBe('tok-2');
    expect(f.calls()).toBe(2);
  });

  it('honours a custom refresh margin', async () => {
    let now = 0;
    const cache = new TokenCache({ now: () => now, refreshMarginMs: 600_000 });
    const f = counter(3600);
    await cache.getToken('k', f.fetcher);
    now = 2_999_999;
    await cache.getToken('k', f.fetcher);
    expect(f.calls()).toBe(1);
    now = 3_000_000;
    await cache.getToken('k', f.fetcher);
    expect(f.calls()).toBe(2);
    await settled();
    expect(await cache.getToken('k', f.fetcher)).toBe('tok-2');
  });

  it('refreshes a token shorter-lived than the margin at half its life, not on every call', async () => {
    let now = 0;
    const cache = new TokenCache({ now: () => now });
    const f = counter(30);
    await cache.getToken('k', f.fetcher);
    now = 14_000;
    expect(await cache.getToken('k', f.fetcher)).toBe('tok-1');
    expect(f.calls()).toBe(1);
    now = 15_000;
    await cache.getToken('k', f.fetcher);
    expect(f.calls()).toBe(2);
    await settled();
    expect(await cache.getToken('k', f.fetcher)).toBe('tok-2');
  });

  it('shares one in-flight fetch between concurrent callers', async () => {
    const cache = new TokenCache();
    const d = deferred<FetchedToken>();
    let calls = 0;
    const fetcher = () => {
      calls += 1;
      return d.promise;
    };
    const waiting = Array.from({ length: 20 }, () => cache.getToken('k', fetcher));
    d.resolve({ token: 'shared', expiresInSec: 3600 });
    expect(await Promise.all(waiting)).toEqual(Array(20).fill('shared'));
    expect(calls).toBe(1);
  });

  it('keeps keys apart', async () => {
    const cache = new TokenCache();
    const f = counter();
    expect(await cache.getToken('a', f.fetcher)).toBe('tok-1');
    expect(await cache.getToken('b', f.fetcher)).toBe('tok-2');
    expect(await cache.getToken('a', f.fetcher)).toBe('tok-1');
  });

  it('does not cache a failed fetch: every waiter sees the failure, the next call fetches again', async () => {
    const cache = new TokenCache();
    const d = deferred<FetchedToken>();
    let calls = 0;
    const failing = () => {
      calls += 1;
      return d.promise;
    };
    const a = cache.getToken('k', failing);
    const b = cache.getToken('k', failing);
    d.reject(new Error('boom'));
    await expect(a).rejects.toThrow('boom');
    await expect(b).rejects.toThrow('boom');
    expect(calls).toBe(1);
    const f = counter();
    expect(await cache.getToken('k', f.fetcher)).toBe('tok-1');
    expect(cache.size).toBe(1);
  });

  it('keeps using the old token when an early refresh fails, until its real expiry', async () => {
    let now = 0;
    const cache = new TokenCache({ now: () => now });
    const f = counter(3600);
    await cache.getToken('k', f.fetcher);
    const failing = () => Promise.reject(new Error('token endpoint down'));
    now = 3_550_000; // inside the 60 s margin, before expiry
    expect(await cache.getToken('k', failing)).toBe('tok-1');
    now = 3_600_000; // expired
    await expect(cache.getToken('k', failing)).rejects.toThrow('token endpoint down');
  });

  it('does not fall back to a token that was invalidated', async () => {
    const cache = new TokenCache();
    const f = counter(3600);
    await cache.getToken('k', f.fetcher);
    cache.invalidate('k', 'tok-1');
    await expect(cache.getToken('k', () => Promise.reject(new Error('down')))).rejects.toThrow('down');
  });

  it('invalidate drops only the token the caller used', async () => {
    const cache = new TokenCache();
    const f = counter();
    await cache.getToken('k', f.fetcher); // tok-1
    cache.invalidate('k', 'tok-1');
    expect(await cache.getToken('k', f.fetcher)).toBe('tok-2');
    cache.invalidate('k', 'tok-1'); // a late caller reporting the old token
    expect(await cache.getToken('k', f.fetcher)).toBe('tok-2');
    expect(f.calls()).toBe(2);
  });

  it('20 callers that all saw the same token expire cause exactly one refresh', async () => {
    const cache = new TokenCache();
    const f = counter();
    const old = await cache.getToken('k', f.fetcher);
    const fresh = await Promise.all(
      Array.from({ length: 20 }, async () => {
        cache.invalidate('k', old);
        return cache.getToken('k', f.fetcher);
      }),
    );
    expect(new Set(fresh)).toEqual(new Set(['tok-2']));
    expect(f.calls()).toBe(2);
  });

  it('an aborted waiter stops waiting with a timeout outcome; the shared fetch still fills the cache', async () => {
    const cache = new TokenCache();
    const d = deferred<FetchedToken>();
    const ac = new AbortController();
    const waiting = cache.getToken('k', () => d.promise, { signal: ac.signal });
    ac.abort();
    const err = await waiting.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TokenFetchError);
    expect((err as TokenFetchError).outcome).toMatchObject({ ok: false, kind: 'timeout', requestSent: false });
    d.resolve({ token: 'late', expiresInSec: 3600 });
    expect(await cache.getToken('k', () => Promise.reject(new Error('must not fetch')))).toBe('late');
  });

  it('evicts the oldest credential beyond maxEntries', async () => {
    const cache = new TokenCache({ maxEntries: 2 });
    const f = counter();
    await cache.getToken('a', f.fetcher);
    await cache.getToken('b', f.fetcher);
    await cache.getToken('c', f.fetcher);
    expect(cache.size).toBe(2);
    expect(await cache.getToken('a', f.fetcher)).toBe('tok-4');
  });
});

describe('tokenCacheKey', () => {
  it('is stable, namespaced, and holds no secret', () => {
    const key = tokenCacheKey('amazon-lwa', 'client-id', 'super-secret', 'Atzr|refresh');
    expect(key).toBe(tokenCacheKey('amazon-lwa', 'client-id', 'super-secret', 'Atzr|refresh'));
    expect(key).toMatch(/^amazon-lwa:[0-9a-f]{64}$/);
    expect(key).not.toContain('super-secret');
    expect(key).not.toContain('Atzr');
  });

  it('differs when any part differs, and parts do not run together', () => {
    const base = tokenCacheKey('x', 'id', 'secret');
    expect(tokenCacheKey('x', 'id', 'secret2')).not.toBe(base);
    expect(tokenCacheKey('y', 'id', 'secret')).not.toBe(base);
    expect(tokenCacheKey('x', 'ids', 'ecret')).not.toBe(base);
  });
});

describe('TokenCache.acquire: fresh or cached', () => {
  it('a token this caller waited for is fresh; the same token served from the cache is not', async () => {
    const cache = new TokenCache();
    const f = counter();
    expect(await cache.acquire('k', f.fetcher)).toEqual({ token: 'tok-1', fresh: true });
    expect(await cache.acquire('k', f.fetcher)).toEqual({ token: 'tok-1', fresh: false });
    cache.invalidate('k', 'tok-1');
    expect(await cache.acquire('k', f.fetcher)).toEqual({ token: 'tok-2', fresh: true });
    expect(f.calls()).toBe(2);
  });

  it('callers that joined one in-flight fetch all get a fresh token', async () => {
    const cache = new TokenCache();
    const gate = deferred<FetchedToken>();
    let calls = 0;
    const fetcher = (): Promise<FetchedToken> => {
      calls += 1;
      return gate.promise;
    };
    const both = Promise.all([cache.acquire('k', fetcher), cache.acquire('k', fetcher)]);
    gate.resolve({ token: 'tok-x', expiresInSec: 3600 });
    expect(await both).toEqual([
      { token: 'tok-x', fresh: true },
      { token: 'tok-x', fresh: true },
    ]);
    expect(calls).toBe(1);
  });

  it('an early refresh that fails falls back to the old token, which counts as cached', async () => {
    let now = 0;
    const cache = new TokenCache({ now: () => now });
    expect(await cache.acquire('k', async () => ({ token: 'old', expiresInSec: 3600 }))).toEqual({ token: 'old', fresh: true });
    now = 3_550_000; // inside the 60 s margin, before the real expiry
    const failing = async (): Promise<FetchedToken> => {
      throw new Error('token endpoint down');
    };
    expect(await cache.acquire('k', failing)).toEqual({ token: 'old', fresh: false });
  });
});

describe('TokenCache.acquire: refresh ahead of expiry without waiting', () => {
  it('inside the margin a hung token endpoint holds nobody up: the cached token comes back at once, and all callers share one background fetch', async () => {
    let now = 0;
    const cache = new TokenCache({ now: () => now });
    await cache.acquire('k', async () => ({ token: 'old', expiresInSec: 3600 }));
    now = 3_550_000; // inside the 60 s margin, 50 s before the real expiry
    const gate = deferred<FetchedToken>();
    let calls = 0;
    const slow = (): Promise<FetchedToken> => {
      calls += 1;
      return gate.promise; // not settled until the test says so
    };
    const ac = new AbortController();
    ac.abort(); // a caller with no time left still gets the valid token
    expect(await cache.acquire('k', slow, { signal: ac.signal })).toEqual({ token: 'old', fresh: false });
    expect(await Promise.all([cache.acquire('k', slow), cache.acquire('k', slow)])).toEqual([
      { token: 'old', fresh: false },
      { token: 'old', fresh: false },
    ]);
    expect(calls).toBe(1);
    gate.resolve({ token: 'new', expiresInSec: 3600 });
    await settled();
    expect(await cache.acquire('k', slow)).toEqual({ token: 'new', fresh: false });
    expect(calls).toBe(1);
  });

  it('once the token has really expired, callers wait for the refresh, joining one already running in the background', async () => {
    let now = 0;
    const cache = new TokenCache({ now: () => now });
    await cache.acquire('k', async () => ({ token: 'old', expiresInSec: 3600 }));
    now = 3_550_000;
    const gate = deferred<FetchedToken>();
    let calls = 0;
    const slow = (): Promise<FetchedToken> => {
      calls += 1;
      return gate.promise;
    };
    expect(await cache.acquire('k', slow)).toEqual({ token: 'old', fresh: false });
    now = 3_600_000; // expired, the background refresh still out
    const waiting = cache.acquire('k', slow);
    gate.resolve({ token: 'new', expiresInSec: 3600 });
    expect(await waiting).toEqual({ token: 'new', fresh: true });
    expect(calls).toBe(1);
  });

  it('a failed background refresh is not cached and raises no unhandled rejection; the next caller in the margin tries again once 1 s has passed', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    process.on('unhandledRejection', onUnhandled);
    try {
      let now = 0;
      const cache = new TokenCache({ now: () => now });
      await cache.acquire('k', async () => ({ token: 'old', expiresInSec: 3600 }));
      now = 3_550_000;
      let calls = 0;
      const failing = async (): Promise<FetchedToken> => {
        calls += 1;
        throw new Error('token endpoint down');
      };
      expect(await cache.acquire('k', failing)).toEqual({ token: 'old', fresh: false });
      await settled();
      // Within the second after the failure, the old token and no new request.
      now += REFRESH_RETRY_MIN_MS - 1;
      expect(await cache.acquire('k', failing)).toEqual({ token: 'old', fresh: false });
      await settled();
      expect(calls).toBe(1);
      now += 1;
      expect(await cache.acquire('k', failing)).toEqual({ token: 'old', fresh: false });
      await settled();
      expect(calls).toBe(2);
      expect(unhandled).toEqual([]);
      // The failure never replaced the token; after the real expiry it is what the caller gets.
      now = 3_600_000;
      await expect(cache.acquire('k', failing)).rejects.toThrow('token endpoint down');
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});

describe('TokenCache.acquire: a failed refresh in the margin is not retried at once', () => {
  const rateLimited = (retryAfterMs?: number) =>
    new TokenFetchError({ ok: false, kind: 'rate_limited', vendorStatus: 429, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}), requestSent: false, message: 'token endpoint rate limited' });

  async function inMargin(): Promise<{ cache: TokenCache; clock: { now: number } }> {
    const clock = { now: 0 };
    const cache = new TokenCache({ now: () => clock.now });
    await cache.acquire('k', async () => ({ token: 'old', expiresInSec: 3600 }));
    clock.now = 3_550_000; // inside the 60 s margin, 50 s before the real expiry
    return { cache, clock };
  }

  it('after a 429 with Retry-After 5 s, 50 calls over the next half second send no further token request; the first call after 5 s does', async () => {
    const { cache, clock } = await inMargin();
    let calls = 0;
    const failing = async (): Promise<FetchedToken> => {
      calls += 1;
      throw rateLimited(5_000);
    };
    const failedAt = clock.now;
    for (let i = 0; i < 50; i++) {
      expect(await cache.acquire('k', failing)).toEqual({ token: 'old', fresh: false });
      await settled();
      clock.now += 10;
    }
    expect(calls).toBe(1);
    clock.now = failedAt + 4_999;
    await cache.acquire('k', failing);
    await settled();
    expect(calls).toBe(1);
    clock.now = failedAt + 5_000;
    const f = counter();
    expect(await cache.acquire('k', f.fetcher)).toEqual({ token: 'old', fresh: false });
    await settled();
    expect(f.calls()).toBe(1);
    expect(await cache.acquire('k', f.fetcher)).toEqual({ token: 'tok-1', fresh: false });
  });

  it('a Retry-After shorter than 1 s (or none) still waits 1 s', async () => {
    for (const retryAfterMs of [undefined, 0, 100]) {
      const { cache, clock } = await inMargin();
      let calls = 0;
      const failing = async (): Promise<FetchedToken> => {
        calls += 1;
        throw rateLimited(retryAfterMs);
      };
      await cache.acquire('k', failing);
      await settled();
      clock.now += 999;
      await cache.acquire('k', failing);
      await settled();
      expect(calls, String(retryAfterMs)).toBe(1);
      clock.now += 1;
      await cache.acquire('k', failing);
      await settled();
      expect(calls, String(retryAfterMs)).toBe(2);
    }
  });

  it('a Retry-After past the real expiry is still honoured once the token has expired: callers are refused at once until it is over, then share one fetch', async () => {
    const { cache, clock } = await inMargin();
    let calls = 0;
    const failing = async (): Promise<FetchedToken> => {
      calls += 1;
      throw rateLimited(600_000);
    };
    await cache.acquire('k', failing);
    await settled();
    clock.now = 3_599_999; // still in the margin: no new request
    expect(await cache.acquire('k', failing)).toEqual({ token: 'old', fresh: false });
    await settled();
    expect(calls).toBe(1);
    clock.now = 3_600_000; // really expired, the wait not over: nothing sent, the wait left handed back
    const refused = await cache.acquire('k', failing).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TokenFetchError);
    expect((refused as TokenFetchError).outcome).toMatchObject({ kind: 'rate_limited', requestSent: false, retryAfterMs: 550_000 });
    expect((refused as TokenFetchError).outcome.vendorStatus).toBeUndefined();
    expect(calls).toBe(1);
    clock.now = 3_550_000 + 600_000; // the wait is over
    const gate = deferred<FetchedToken>();
    let fetches = 0;
    const slow = (): Promise<FetchedToken> => {
      fetches += 1;
      return gate.promise;
    };
    const both = Promise.all([cache.acquire('k', slow), cache.acquire('k', slow)]);
    gate.resolve({ token: 'new', expiresInSec: 3600 });
    expect(await both).toEqual([
      { token: 'new', fresh: true },
      { token: 'new', fresh: true },
    ]);
    expect(fetches).toBe(1);
  });

  it('an invalidated token is not covered by the wait: the next caller fetches at once', async () => {
    const { cache } = await inMargin();
    await cache.acquire('k', async () => {
      throw rateLimited(5_000);
    });
    await settled();
    cache.invalidate('k', 'old'); // the vendor refused it
    const f = counter();
    expect(await cache.acquire('k', f.fetcher)).toEqual({ token: 'tok-1', fresh: true });
    expect(f.calls()).toBe(1);
  });

  it('a new token after the wait starts with no wait of its own', async () => {
    const { cache, clock } = await inMargin();
    await cache.acquire('k', async () => {
      throw rateLimited(2_000);
    });
    await settled();
    clock.now += 2_000;
    await cache.acquire('k', async () => ({ token: 'new', expiresInSec: 3600 }));
    await settled();
    clock.now += 3_550_000; // the new token's own margin
    const f = counter();
    expect(await cache.acquire('k', f.fetcher)).toEqual({ token: 'new', fresh: false });
    await settled();
    expect(f.calls()).toBe(1);
  });
});

/**
 * The call's budget spent before it asks for a token (a Shopify refund's lease wait and credentials re-read outlasted
 * it): the fetch it started, or joined, was left with a derived promise nobody handled, and when that fetch failed
 * Node's default (--unhandled-rejections=throw) ended the gateway.
 */
describe('TokenCache.acquire with an already-aborted signal', () => {
  const watchingUnhandled = async (body: () => Promise<void>): Promise<unknown[]> => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      await body();
      await new Promise((r) => setTimeout(r, 20));
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    return unhandled;
  };
  const spent = (): AbortSignal => AbortSignal.abort();

  it('starts no token request, and answers the budget error', async () => {
    let fetches = 0;
    const cache = new TokenCache();
    const fetcher = (): Promise<FetchedToken> => {
      fetches++;
      return Promise.reject(new Error('token endpoint down'));
    };
    const unhandled = await watchingUnhandled(async () => {
      await expect(cache.acquire('k', fetcher, { signal: spent() })).rejects.toThrow(/call time budget spent/);
    });
    expect(fetches).toBe(0);
    expect(unhandled).toEqual([]);
  });

  it('joining a fetch in flight that then fails raises no unhandled rejection; the caller that waits gets the failure', async () => {
    const cache = new TokenCache();
    let fail!: (e: unknown) => void;
    const fetcher = (): Promise<FetchedToken> => new Promise((_, reject) => (fail = reject));
    let waiting!: Promise<unknown>;
    const unhandled = await watchingUnhandled(async () => {
      waiting = cache.acquire('k', fetcher).catch((e: unknown) => e);
      await expect(cache.acquire('k', fetcher, { signal: spent() })).rejects.toThrow(/call time budget spent/);
      fail(new Error('token endpoint down'));
    });
    expect(unhandled).toEqual([]);
    expect(String(await waiting)).toMatch(/token endpoint down/);
  });
});

describe('TokenCache: tokens whose credentials are gone', () => {
  it('forgetOwner drops the tokens an owner\'s calls used, and only those', async () => {
    const cache = new TokenCache();
    const a = counter();
    const b = counter();
    await cache.getToken('key-a', a.fetcher, { owner: 'org1:amazon' });
    await cache.getToken('key-b', b.fetcher, { owner: 'org2:amazon' });
    expect(cache.size).toBe(2);
    cache.forgetOwner('org1:amazon');
    expect(cache.size).toBe(1);
    expect(await cache.getToken('key-b', b.fetcher, { owner: 'org2:amazon' })).toBe('tok-1'); // still cached
    expect(await cache.getToken('key-a', a.fetcher, { owner: 'org1:amazon' })).toBe('tok-2'); // fetched anew
    cache.forgetOwner('nobody'); // nothing to drop
    expect(cache.size).toBe(2);
  });

  it('a fetch under way when its owner is forgotten hands its token to its callers but does not keep it', async () => {
    const cache = new TokenCache();
    const d = deferred<FetchedToken>();
    const waiting = cache.getToken('key', () => d.promise, { owner: 'org1:jumio' });
    cache.forgetOwner('org1:jumio');
    d.resolve({ token: 'in-flight', expiresInSec: 3600 });
    expect(await waiting).toBe('in-flight');
    expect(cache.size).toBe(0);
  });

  it('an expired token is not kept: dropped when next asked for, before the fetch that replaces it', async () => {
    let now = 0;
    const cache = new TokenCache({ now: () => now });
    const d = deferred<FetchedToken>();
    await cache.getToken('key', async () => ({ token: 'old', expiresInSec: 60 }));
    now = 61_000;
    const next = cache.getToken('key', () => d.promise);
    expect(cache.size).toBe(0); // gone while the new one is fetched
    d.resolve({ token: 'new', expiresInSec: 60 });
    expect(await next).toBe('new');
    expect(cache.size).toBe(1);
  });
});

describe('TokenCache.acquire: a token endpoint that asked for a wait, with no token cached', () => {
  const failure = (kind: 'rate_limited' | 'server_error', status: number, retryAfterMs?: number, retryAfterIsDefault?: true) =>
    new TokenFetchError({
      ok: false,
      kind,
      vendorStatus: status,
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
      ...(retryAfterIsDefault ? { retryAfterIsDefault } : {}),
      requestSent: false,
      message: 'token endpoint said no',
    });

  function failingWith(err: TokenFetchError): { fetcher: () => Promise<FetchedToken>; calls: () => number } {
    let n = 0;
    return {
      fetcher: async () => {
        n += 1;
        throw err;
      },
      calls: () => n,
    };
  }

  it('a 429 with Retry-After 30 s: every caller within the wait is refused at once (rate_limited, the wait left, nothing sent); the first after it fetches', async () => {
    const clock = { now: 0 };
    const cache = new TokenCache({ now: () => clock.now });
    const f = failingWith(failure('rate_limited', 429, 30_000));
    await expect(cache.acquire('k', f.fetcher)).rejects.toBeInstanceOf(TokenFetchError);
    for (const at of [1, 10_000, 29_999]) {
      clock.now = at;
      const err = (await cache.acquire('k', f.fetcher).catch((e: unknown) => e)) as TokenFetchError;
      expect(err.outcome).toMatchObject({ kind: 'rate_limited', requestSent: false, retryAfterMs: 30_000 - at });
      expect(err.outcome.retryAfterIsDefault).toBeUndefined();
    }
    expect(f.calls()).toBe(1);
    clock.now = 30_000;
    const ok = counter();
    expect(await cache.acquire('k', ok.fetcher)).toEqual({ token: 'tok-1', fresh: true });
    // A token bought ends the wait: after it expires the next fetch goes at once.
    clock.now = 30_000 + 3_600_000;
    expect(await cache.acquire('k', ok.fetcher)).toEqual({ token: 'tok-2', fresh: true });
    await expect(cache.acquire('other', ok.fetcher)).resolves.toBeTruthy(); // other keys were never held off
  });

  it('a 429 naming no wait holds off 1 s (its default marked as such); a 503 naming a wait holds off too; a plain 503 does not', async () => {
    const clock = { now: 0 };
    const cache = new TokenCache({ now: () => clock.now });
    const noWait = failingWith(failure('rate_limited', 429, 100, true));
    await expect(cache.acquire('a', noWait.fetcher)).rejects.toBeInstanceOf(TokenFetchError);
    clock.now = 999;
    const held = (await cache.acquire('a', noWait.fetcher).catch((e: unknown) => e)) as TokenFetchError;
    expect(held.outcome).toMatchObject({ kind: 'rate_limited', retryAfterMs: 1, retryAfterIsDefault: true });
    clock.now = 1_000;
    await expect(cache.acquire('a', noWait.fetcher)).rejects.toBeInstanceOf(TokenFetchError);
    expect(noWait.calls()).toBe(2);

    const named503 = failingWith(failure('server_error', 503, 5_000));
    await expect(cache.acquire('b', named503.fetcher)).rejects.toBeInstanceOf(TokenFetchError);
    // Held off by the wait the 503 named, not failed by the vendor: rate-limited (VENDOR_RATE_LIMITED with the wait left,
    // nothing against its breaker), with no status (the vendor was not asked).
    const held503 = (await cache.acquire('b', named503.fetcher).catch((e: unknown) => e)) as TokenFetchError;
    expect(held503.outcome).toMatchObject({ kind: 'rate_limited', retryAfterMs: 5_000, requestSent: false });
    expect(held503.outcome.vendorStatus).toBeUndefined();
    expect(held503.outcome.retryAfterIsDefault).toBeUndefined(); // the endpoint named it: reported as retryAfterSeconds
    expect(named503.calls()).toBe(1);

    const plain503 = failingWith(failure('server_error', 503));
    await expect(cache.acquire('c', plain503.fetcher)).rejects.toBeInstanceOf(TokenFetchError);
    await expect(cache.acquire('c', plain503.fetcher)).rejects.toBeInstanceOf(TokenFetchError);
    expect(plain503.calls()).toBe(2);
  });

  it("the owner's credentials forgotten (deleted or replaced) end the wait", async () => {
    const cache = new TokenCache({ now: () => 0 });
    const f = failingWith(failure('rate_limited', 429, 30_000));
    await expect(cache.acquire('k', f.fetcher, { owner: 'org1:jumio' })).rejects.toBeInstanceOf(TokenFetchError);
    cache.forgetOwner('org1:jumio');
    const ok = counter();
    expect(await cache.acquire('k', ok.fetcher, { owner: 'org1:jumio' })).toEqual({ token: 'tok-1', fresh: true });
  });
});

describe('TokenCache: owner records and their tokens', () => {
  it("forgetOwner still finds the token of an org seen long ago whose token was refreshed since, however many orgs came after", async () => {
    let now = 0;
    const cache = new TokenCache({ maxEntries: 3, refreshMarginMs: 60_000, now: () => now });
    const f = counter();
    await cache.getToken('kA', f.fetcher, { owner: 'orgA:amazon' });
    await cache.getToken('kB', f.fetcher, { owner: 'orgB:amazon' });
    await cache.getToken('kC', f.fetcher, { owner: 'orgC:amazon' });
    now = 3_600_000 - 30_000; // orgA's token in its margin: refreshed behind its next call (the youngest entry now)
    await cache.getToken('kA', f.fetcher, { owner: 'orgA:amazon' });
    await settled();
    await cache.getToken('kD', f.fetcher, { owner: 'orgD:amazon' }); // a new org: something makes room
    const entries = (cache as unknown as { entries: Map<string, unknown> }).entries;
    expect(entries.has('kA')).toBe(true);
    cache.forgetOwner('orgA:amazon');
    expect(entries.has('kA')).toBe(false);
  });

  it('an owner record that makes room takes its tokens with it: no token is kept that forgetOwner could not find', async () => {
    const cache = new TokenCache({ maxEntries: 2 });
    const f = counter();
    await cache.getToken('k1', f.fetcher, { owner: 'org1:jumio' });
    await cache.getToken('k2', f.fetcher, { owner: 'org2:jumio' });
    // org3's call has no token cached yet (a shared key k2 already cached): org1's record, used longest ago, goes with k1.
    await cache.getToken('k2', f.fetcher, { owner: 'org3:jumio' });
    const entries = (cache as unknown as { entries: Map<string, unknown> }).entries;
    expect([...entries.keys()]).toEqual(['k2']);
  });
});

describe('TokenCache.acquire: credentials moved on since the call loaded them', () => {
  const moved = { current: () => false, changed: async () => true };

  it('changed before the call asks: no token handed out and none bought; a local failure, nothing sent', async () => {
    const cache = new TokenCache();
    const f = counter();
    await cache.acquire('k', f.fetcher); // cached, from the credentials as they were
    const err = (await cache.acquire('k', f.fetcher, { credentials: moved }).catch((e: unknown) => e)) as TokenFetchError;
    expect(err).toBeInstanceOf(TokenFetchError);
    expect(err.outcome).toMatchObject({ kind: 'network', local: true, requestSent: false });
    expect(f.calls()).toBe(1);
  });

  it('changed while the token was fetched: neither kept nor handed out', async () => {
    const cache = new TokenCache();
    let current = true;
    const d = deferred<FetchedToken>();
    const waiting = cache.acquire('k', () => d.promise, { credentials: { current: () => current, changed: async () => true } });
    current = false; // the admin's DELETE answered meanwhile
    d.resolve({ token: 'bought-with-deleted', expiresInSec: 3600 });
    await expect(waiting).rejects.toMatchObject({ outcome: { kind: 'network', local: true, requestSent: false } });
    expect(cache.size).toBe(0);
  });

  it('a PUT of the same config (not changed, by the stamp): the call goes on, though the token it buys is not kept', async () => {
    const cache = new TokenCache();
    const f = counter();
    expect(await cache.acquire('k', f.fetcher, { credentials: { current: () => false, changed: async () => false } })).toEqual({ token: 'tok-1', fresh: true });
    expect(cache.size).toBe(0);
  });
});
