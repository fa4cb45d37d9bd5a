/**
 * Waits and lifetimes are durations: they run on the monotonic clock, whatever the wall clock does. A clock
 * reviewer found four measured on Date.now(), which NTP steps back or forward on a running host:
 * - the refund-lease wait: stepped back, it ran past its bound and the lease was taken with almost none of the call's
 *   budget left, so the refund went out to end indeterminate — the case the bound exists for;
 * - the cached vendor token (Amazon LWA, Jumio, Shopify): stepped back, a dead token kept being handed out;
 * - the wait for another replica's token renewal: stepped forward, it gave up at once;
 * - a Retry-After date was read against this host's clock, not the vendor's (its answer's Date header): a vendor
 *   minutes behind asking for 30 s was read as no wait at all.
 * The wall clock is stepped by replacing Date.now for the test.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { EnvelopeCipher } from '../../src/common/crypto/envelope-cipher.js';
import type { AppConfig } from '../../src/config/app-config.js';
import { VendorTokenStore } from '../../src/credentials/vendor-token.store.js';
import type { Sql } from '../../src/db/sql.js';
import { NANGO_EMULATOR_CREDENTIALS } from '../../src/emulator/nango.emulator.js';
import { TokenCache } from '../../src/vendors/auth/token-cache.js';
import { callContext, emulatorEndpoints } from '../../src/vendors/handler.spec-support.js';
import { NangoHandler } from '../../src/vendors/nango/nango.handler.js';
import { SqlRefundLeases, refundLeaseTiming, type LeaseSql } from '../../src/vendors/shopify/shopify.refund-lease.js';

afterEach(() => vi.restoreAllMocks());

/** Date.now() as the process will read it: the real one plus whatever `step()` says at the time. */
function steppedWallClock(step: () => number): void {
  const realNow = Date.now.bind(Date);
  vi.spyOn(Date, 'now').mockImplementation(() => realNow() + step());
}

describe('a wall clock stepped while the gateway waits', () => {
  it('the refund-lease wait ends once its bound is spent, though the wall clock went back 10 minutes: nothing is sent', async () => {
    const timing = refundLeaseTiming(2_000); // maxWaitMs 1 s: the other half of the budget is the refund's own request
    let polls = 0;
    steppedWallClock(() => (polls > 0 ? -600_000 : 0));
    const startedAt = performance.now();
    // Another refund of the order holds the lease for 1.6 s.
    const sql: LeaseSql = {
      prepared: async <T>() => {
        polls++;
        return (performance.now() - startedAt > 1_600 ? [{ held: 1 }] : []) as T[];
      },
    };
    const callDeadline = performance.now() + 2_000;
    const outcome = await new SqlRefundLeases(sql, timing).acquire({ orgId: 'o', shopDomain: 's.myshopify.com', orderId: '1' }, 'h', new AbortController().signal, callDeadline);
    // Before: the wait ran on, and the lease was taken with ~0.4 s of the 2 s budget left (outcome null: send it).
    expect(outcome, `taken with ${Math.round(callDeadline - performance.now())} ms of the budget left`).toMatchObject({ ok: false, requestSent: false });
    expect(performance.now() - startedAt).toBeLessThan(1_600);
  });

  it('a cached token is not handed out past its lifetime because the wall clock went back 10 minutes', async () => {
    let stepMs = 0;
    steppedWallClock(() => stepMs);
    const cache = new TokenCache({ refreshMarginMs: 0 }); // as the handlers build it, the clock left to its default
    let fetched = 0;
    const fetcher = async () => ({ token: `tok-${++fetched}`, expiresInSec: 1 });
    expect(await cache.acquire('k', fetcher)).toEqual({ token: 'tok-1', fresh: true });
    stepMs = -600_000;
    await new Promise((r) => setTimeout(r, 1_200)); // its 1 s lifetime is over at the vendor
    expect(await cache.acquire('k', fetcher)).toEqual({ token: 'tok-2', fresh: true }); // before: tok-1, no fetch
  });

  it('waiting for another replica to renew a rotating token goes on until its lease frees, though the wall clock jumped 2 minutes ahead', async () => {
    let stepMs = 0;
    steppedWallClock(() => stepMs);
    const grant = { orgId: '00000000-0000-4000-8000-000000000001', integration: 'shopify' as const, grantId: 'g1', configuredRefreshToken: 'rt-configured' };
    const emptyRow = { grant_id: 'g1', key_id: null, iv: null, ciphertext: null, auth_tag: null, remaining_sec: null };
    const startedAt = performance.now();
    let claims = 0;
    const sql = {
      prepared: async (text: string) => {
        if (text.startsWith('SELECT')) return [emptyRow];
        if (text.startsWith('INSERT')) {
          if (++claims === 1) stepMs = 120_000;
          return performance.now() - startedAt > 300 ? [emptyRow] : []; // the other replica's lease is free 300 ms on
        }
        if (text.startsWith('UPDATE')) return [{ stored: 1 }];
        return [];
      },
    } as unknown as Sql;
    const cipher = new EnvelopeCipher({ activeKeyId: 'k1', keys: new Map([['k1', randomBytes(32)]]) } as never);
    const store = new VendorTokenStore(sql, cipher, { VENDOR_TIMEOUT_MS: 15_000 } as AppConfig);
    const refresh = vi.fn(async () => ({ token: 'at-new', expiresInSec: 3600, refreshToken: 'rt-new' }));
    // Before: TokenFetchError "another replica is still renewing" at once.
    expect(await store.obtain(grant, refresh).catch((e: Error) => e.message)).toEqual({ token: 'at-new', expiresInSec: 3600 });
  });
});

describe('a Retry-After date from a vendor whose clock is not this host\'s (Nango over HTTP)', () => {
  let server: Server;
  let url: string;
  let vendorSkewMs = 0;
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const vendorNow = Date.now() + vendorSkewMs;
        res.statusCode = 429;
        res.setHeader('Content-Type', 'application/json');
        res.setHeader('Date', new Date(vendorNow).toUTCString());
        res.setHeader('Retry-After', new Date(vendorNow + 30_000).toUTCString()); // "in 30 s" by the vendor's clock
        res.end(JSON.stringify({ error: { code: 'too_many_request', message: 'slow down' } }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it.each([
    ['agree', 0],
    ['5 minutes behind', -300_000], // before: 0 (retry at once, retryAfterSeconds 0)
    ['5 minutes ahead', 300_000], // before: some 330 s
  ])('the vendor\'s clock %s: a wait of 30 s', async (_what, skewMs) => {
    vendorSkewMs = skewMs;
    const out = await new NangoHandler(emulatorEndpoints(url)).execute(
      callContext({ toolName: 'nango_proxy', action: 'get', params: { path: 'v1/customers/1' }, credentials: { ...NANGO_EMULATOR_CREDENTIALS } }),
    );
    expect(out).toMatchObject({ ok: false, kind: 'rate_limited' });
    const waitMs = out.ok ? undefined : out.retryAfterMs;
    expect(waitMs).toBeGreaterThan(28_000);
    expect(waitMs).toBeLessThanOrEqual(31_000);
  });
});
