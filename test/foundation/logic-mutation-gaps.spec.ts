/**
 * Cases a mutation-testing pass found untested: each fails on a surviving
 * mutant of the named module. Pure classes and functions, no database.
 */
import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/auth/rate-limiter.js';
import { redactedParamMessage } from '../../src/catalog/model-text.js';
import { CircuitBreaker } from '../../src/executor/circuit-breaker.js';
import { REDACTED } from '../../src/redaction/markers.js';
import { redactOutput } from '../../src/redaction/redaction.service.js';

describe('RateLimiter.take (rate-limiter.ts)', () => {
  // rate-limiter.ts:24 Math.min(charge, this.burst) -> charge: a cost above the burst is then refused for ever;
  // rate-limiter.ts:34 b.tokens -= charge -> need: the key is then not left in debt by the rest
  it('a cost above the burst passes on a full bucket and leaves the key in debt by the rest', () => {
    const clock = { now: 0 };
    const limiter = new RateLimiter(1, () => clock.now); // burst 2
    expect(limiter.take('k', 5)).toBe(0); // 2 - 5 = -3
    expect(limiter.take('k')).toBe(4); // 1 token needs 4 more: 4 s
    clock.now = 4_000;
    expect(limiter.take('k')).toBe(0);
  });

  // rate-limiter.ts:22 rps <= 0 -> rps < 0: "limits off" then refuses the second request (wait Infinity)
  it('rps 0 means no limit', () => {
    const limiter = new RateLimiter(0, () => 0);
    for (let i = 0; i < 5; i++) expect(limiter.take('k')).toBe(0);
  });

  // rate-limiter.ts:28 eviction dropped: buckets then grow without bound under key churn
  it('keeps at most 100,000 buckets: the oldest key starts again full', () => {
    const limiter = new RateLimiter(1, () => 0); // burst 2, no refill
    expect(limiter.take('first', 2)).toBe(0);
    expect(limiter.take('first')).toBeGreaterThan(0);
    for (let i = 0; i < 100_000; i++) limiter.take(`k${i}`);
    expect(limiter.take('first')).toBe(0);
  });
});

describe('CircuitBreaker.refusing (circuit-breaker.ts:43)', () => {
  // drop `&& this.probeInFlight`: a half-open breaker whose probe gave its slot back then reads as refusing, and the
  // approved-call runner (approved-call-runner.service.ts:283) fails approved calls that would have been the probe
  it('half-open with the probe slot free is not refusing', () => {
    let t = 0;
    const b = new CircuitBreaker(1, 1_000, () => t);
    b.onFailure(b.tryAcquire()!);
    expect(b.refusing).toBe(true);
    t = 1_000;
    const probe = b.tryAcquire()!;
    expect(probe.probe).toBe(true);
    expect(b.refusing).toBe(true);
    b.onAbandoned(probe);
    expect(b.current).toBe('half_open');
    expect(b.refusing).toBe(false);
  });
});

describe('redactedParamMessage (model-text.ts:40)', () => {
  // `if (i < 0) return redactedModelText(...)` -> `return message`: a message without ": " is then echoed unredacted
  it('redacts a message that has no "name: problem" split', () => {
    const out = redactedParamMessage('unknown parameter 4111 1111 1111 1111');
    expect(out).toBe(`unknown parameter ${REDACTED}`);
  });
});

describe('output walker: a postal key holding a structure (value-walker.ts:216)', () => {
  // `: REDACTED` -> `: postal`: an object or array under zip / postcode inside an address is then kept raw, unredacted
  it('an object under an address zip is not kept raw', () => {
    const out = redactOutput({ shipping_address: { zip: { code: '90210', note: 'token shpat_0123456789abcdef0123456789abcdef' } } });
    expect(out).toEqual({ shipping_address: { zip: REDACTED } });
  });
});
