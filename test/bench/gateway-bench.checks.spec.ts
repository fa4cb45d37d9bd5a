import { describe, expect, it } from 'vitest';
import { blockedNeverStartedCheck, pacedSeconds, parseLogLevel, rateHeld, rateHeldCheck, SOAK_MIN_RATE_SHARE } from '../../bench/gateway-bench.checks.js';

describe('soak: rate held', () => {
  const soak300 = { amount: 90_000, rate: 300, connections: 8 };

  it("computes autocannon's own schedule: 300/s over 8 connections is 38 or 37 a second each", () => {
    expect(pacedSeconds(90_000, 300, 8)).toBe(305); // 11,250 calls per connection / 37 a second
    expect(pacedSeconds(4500, 300, 8)).toBe(16); // 562 / 37 → 16 quotas, the last at 15 s
    expect(pacedSeconds(3000, 150, 8)).toBe(21); // 375 / 18: a 20 s soak at 150/s runs 21 s
    expect(pacedSeconds(10, 4, 8)).toBe(3); // connections lowered to the rate: 4 × 1 a second
  });

  it('passes the README soaks: 90,000 calls answered in 305.2 s (the pace itself) and in 311 s', () => {
    expect(rateHeldCheck(90_000, 304.2, soak300).met).toBe(true);
    expect(rateHeldCheck(90_000, 310, soak300).met).toBe(true);
  });

  it('passes an on-pace short run: 15 s at 300/s, the last answer at 15.1 s', () => {
    const check = rateHeldCheck(4500, 15.1, { amount: 4500, rate: 300, connections: 8 });
    expect(check.met).toBe(true);
    expect(check.detail).toContain('279.5/s = 99.4% of 281.3/s');
  });

  it('fails a gateway that fell behind: the same calls answered 10 % later than paced', () => {
    expect(SOAK_MIN_RATE_SHARE).toBe(0.95);
    const check = rateHeldCheck(90_000, 304 * 1.1, soak300);
    expect(check.met).toBe(false);
    expect(check.name).toBe('soak: rate held (>= 95% of the pace)');
    expect(rateHeldCheck(4500, 17, { amount: 4500, rate: 300, connections: 8 }).met).toBe(false); // 16 / 18 = 89 %
  });

  it('is exact at the bound and fails an empty run', () => {
    expect(rateHeld(285, 300)).toBe(true);
    expect(rateHeld(284.9, 300)).toBe(false);
    expect(rateHeld(Number.NaN, 300)).toBe(false);
    expect(rateHeldCheck(0, 0, soak300).met).toBe(false);
  });
});

describe('blocked: no vendor call', () => {
  const clean = { rows: 5001, notBlocked: 0, started: 0, startedEvents: 0 };

  it('passes when every row of the blocked tool is blocked and none started', () => {
    expect(blockedNeverStartedCheck(clean, 5000).met).toBe(true);
  });

  it.each([
    ['a row that is not blocked', { ...clean, notBlocked: 1 }],
    ['a row with started_at', { ...clean, started: 1 }],
    ['a tool_call.started event', { ...clean, startedEvents: 1 }],
    ['no rows at all', { ...clean, rows: 0 }],
  ])('fails on %s', (_what, stats) => {
    const check = blockedNeverStartedCheck(stats, stats.rows === 0 ? 0 : 5000);
    expect(check.met).toBe(false);
  });

  it('fails when fewer rows than 403 answers were recorded (the answers were not these calls)', () => {
    const check = blockedNeverStartedCheck(clean, 6000);
    expect(check.met).toBe(false);
    expect(check.detail).toContain('5001 rows for 6000 403 answers');
  });
});

describe('--log-level', () => {
  it("takes pino's levels and refuses anything else", () => {
    expect(parseLogLevel('info')).toBe('info');
    expect(parseLogLevel('warn')).toBe('warn');
    expect(() => parseLogLevel('verbose')).toThrow(/--log-level must be one of fatal, error, warn, info, debug, trace, silent/);
    expect(() => parseLogLevel('INFO')).toThrow();
  });
});
