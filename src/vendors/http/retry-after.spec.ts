import { afterEach, describe, expect, it } from 'vitest';
import { failedOutcome } from '../vendor-handler.js';
import { parseHttpDate, parseRetryAfterMs, retryAfterMsOf, vendorNamedWaitMs, withWait } from './retry-after.js';

const NOW = Date.parse('2026-12-02T03:55:00Z');

describe('parseRetryAfterMs: the three HTTP-date forms (RFC 9110 §5.6.7)', () => {
  const tz = process.env.TZ;
  afterEach(() => {
    if (tz === undefined) delete process.env.TZ;
    else process.env.TZ = tz;
  });

  it('reads IMF-fixdate, RFC 850 and asctime alike', () => {
    expect(parseRetryAfterMs('Wed, 02 Dec 2026 03:55:07 GMT', NOW)).toBe(7_000);
    expect(parseRetryAfterMs('Wednesday, 02-Dec-26 03:55:07 GMT', NOW)).toBe(7_000);
    expect(parseRetryAfterMs('Wed Dec  2 03:55:07 2026', NOW)).toBe(7_000);
    expect(parseRetryAfterMs('Sat Dec 12 03:55:00 2026', NOW)).toBe(86_400_000); // ten days out: a day at most
  });

  it('reads asctime, which names no zone, as UTC whatever the server\'s own zone', () => {
    process.env.TZ = 'America/New_York';
    expect(parseRetryAfterMs('Wed Dec  2 03:55:07 2026', NOW)).toBe(7_000);
    process.env.TZ = 'Asia/Tokyo';
    expect(parseRetryAfterMs('Wed Dec  2 03:55:07 2026', NOW)).toBe(7_000);
  });

  it('puts an RFC 850 two-digit year more than 50 years ahead in the last century', () => {
    expect(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT', NOW)).toBe(Date.parse('1994-11-06T08:49:37Z'));
    expect(parseHttpDate('Thursday, 01-Jan-76 00:00:00 GMT', NOW)).toBe(Date.parse('2076-01-01T00:00:00Z'));
    expect(parseHttpDate('Saturday, 01-Jan-77 00:00:00 GMT', NOW)).toBe(Date.parse('1977-01-01T00:00:00Z'));
  });

  it('refuses what is no HTTP-date: another zone, no zone where one is due, a day the month lacks, a number', () => {
    expect(parseRetryAfterMs('Wed, 02 Dec 2026 03:55:07 +0100', NOW)).toBeUndefined();
    expect(parseRetryAfterMs('Wed, 02 Dec 2026 03:55:07', NOW)).toBeUndefined();
    expect(parseRetryAfterMs('Wed, 31 Feb 2026 03:55:07 GMT', NOW)).toBeUndefined();
    expect(parseRetryAfterMs('Wed, 02 Foo 2026 03:55:07 GMT', NOW)).toBeUndefined();
    expect(parseRetryAfterMs('Wed, 02 Dec 2026 25:55:07 GMT', NOW)).toBeUndefined();
    expect(parseRetryAfterMs('2026-12-02T03:55:07Z', NOW)).toBeUndefined();
  });
});

describe('retryAfterMsOf: a date is read against the answer\'s own Date header (the vendor\'s clock)', () => {
  const date = (ms: number) => new Date(ms).toUTCString();

  it('30 s by the vendor\'s clock is 30 s, whether its clock is minutes behind this host\'s or ahead', () => {
    for (const skewMs of [0, -300_000, 300_000]) {
      const vendorNow = Date.now() + skewMs;
      expect(retryAfterMsOf({ date: date(vendorNow), 'retry-after': date(vendorNow + 30_000) }), `skew ${skewMs} ms`).toBe(30_000);
    }
  });

  it('seconds are seconds; a date without a (readable) Date header is read against this host\'s clock', () => {
    expect(retryAfterMsOf({ date: date(Date.now() - 600_000), 'retry-after': '2' })).toBe(2_000);
    const inTenSeconds = date(Date.now() + 10_000);
    for (const headers of [{ 'retry-after': inTenSeconds }, { date: 'yesterday', 'retry-after': inTenSeconds }]) {
      const ms = retryAfterMsOf(headers)!;
      expect(ms).toBeGreaterThan(8_000);
      expect(ms).toBeLessThanOrEqual(10_000);
    }
    expect(retryAfterMsOf({ date: date(Date.now()) })).toBeUndefined();
  });
});

describe('withWait / vendorNamedWaitMs', () => {
  const limited = failedOutcome('rate_limited', '429', 429);

  it('the default wait is slept on (retryAfterMs) but is not the vendor\'s, also once the outcome is copied; a named one is both', () => {
    const guessed = withWait(limited, undefined, 1_000);
    expect(guessed.retryAfterMs).toBe(1_000);
    expect(vendorNamedWaitMs(guessed)).toBeUndefined();
    expect(vendorNamedWaitMs({ ...guessed, local: true })).toBeUndefined();
    const named = withWait(limited, 2_500, 1_000);
    expect(named).toMatchObject({ kind: 'rate_limited', retryAfterMs: 2_500 });
    expect(vendorNamedWaitMs(named)).toBe(2_500);
    // Built without withWait (Shopify's THROTTLED cost maths): the wait is the vendor's.
    expect(vendorNamedWaitMs(failedOutcome('rate_limited', 'THROTTLED', 200, 120))).toBe(120);
    expect(vendorNamedWaitMs(limited)).toBeUndefined();
  });
});
