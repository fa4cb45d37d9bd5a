import { describe, expect, it } from 'vitest';
import type { VendorOutcome } from '../vendors/vendor-handler.js';
import { countsAgainstBreaker, errorCodeFor, isRetryable, refusedInput } from './failure-mapping.js';

const WRITE = { sideEffect: 'write' as const, overwrite: false };
const READ = { sideEffect: 'read' as const };
const OVERWRITE = { sideEffect: 'write' as const, overwrite: true };

type F = Extract<VendorOutcome, { ok: false }>;
const f = (kind: F['kind'], extra: Partial<F> = {}): F => ({ ok: false, kind, requestSent: true, message: 'm', ...extra });
const read = { idempotent: true, sideEffect: 'read' as const };
const idemWrite = { idempotent: true, sideEffect: 'write' as const };
const write = { idempotent: false, sideEffect: 'write' as const };

describe('failure mapping', () => {
  it('maps kinds to error codes', () => {
    expect(errorCodeFor(f('not_found'), READ)).toBe('VENDOR_NOT_FOUND');
    expect(errorCodeFor(f('auth'), READ)).toBe('CREDENTIALS_INVALID');
    expect(errorCodeFor(f('rate_limited'), READ)).toBe('VENDOR_RATE_LIMITED');
    expect(errorCodeFor(f('server_error'), READ)).toBe('VENDOR_ERROR');
    expect(errorCodeFor(f('timeout'), READ)).toBe('VENDOR_TIMEOUT');
    expect(errorCodeFor(f('bad_response'), READ)).toBe('VENDOR_ERROR');
  });

  it("calls the gateway's own database trouble before sending EXECUTION_ERROR, never the vendor's", () => {
    const local = (kind: F['kind']): F => f(kind, { requestSent: false, local: true });
    expect(errorCodeFor(local('network'), READ)).toBe('EXECUTION_ERROR');
    expect(errorCodeFor(local('network'), WRITE)).toBe('EXECUTION_ERROR');
    expect(errorCodeFor(f('network', { requestSent: false }), READ)).toBe('VENDOR_ERROR'); // a refused connect is the vendor's
    // A local wait (another refund of the order in flight, another replica renewing the token) stays a timeout.
    expect(errorCodeFor(local('timeout'), READ)).toBe('VENDOR_TIMEOUT');
  });

  it('calls a write whose answer was lost OUTCOME_UNKNOWN, but not one that never left', () => {
    expect(errorCodeFor(f('timeout'), WRITE)).toBe('OUTCOME_UNKNOWN');
    expect(errorCodeFor(f('network'), WRITE)).toBe('OUTCOME_UNKNOWN');
    expect(errorCodeFor(f('network', { requestSent: false }), WRITE)).toBe('VENDOR_ERROR');
    // A 5xx may come back while the vendor goes on to apply the write (VENDORS.md §1.9 point 4) …
    expect(errorCodeFor(f('server_error', { vendorStatus: 504 }), WRITE)).toBe('OUTCOME_UNKNOWN');
    expect(errorCodeFor(f('server_error', { vendorStatus: 500 }), WRITE)).toBe('OUTCOME_UNKNOWN');
    // … unless a second call leaves the same state (an overwrite): then failed, and trying again is harmless.
    expect(errorCodeFor(f('server_error', { vendorStatus: 500 }), OVERWRITE)).toBe('VENDOR_ERROR');
    expect(errorCodeFor(f('server_error', { vendorStatus: 500, requestSent: false }), WRITE)).toBe('VENDOR_ERROR');
    expect(errorCodeFor(f('server_error', { vendorStatus: 500 }), READ)).toBe('VENDOR_ERROR');
    // An overwrite whose answer was lost is still unknown: nobody knows which text is there.
    expect(errorCodeFor(f('timeout'), OVERWRITE)).toBe('OUTCOME_UNKNOWN');
  });

  it('retries reads on transient failures only', () => {
    expect(isRetryable(f('server_error'), read, 2_000)).toBe(true);
    expect(isRetryable(f('timeout'), read, 2_000)).toBe(true);
    expect(isRetryable(f('network'), read, 2_000)).toBe(true);
    expect(isRetryable(f('rate_limited', { retryAfterMs: 1_000 }), read, 2_000)).toBe(true);
    expect(isRetryable(f('rate_limited', { retryAfterMs: 60_000 }), read, 2_000)).toBe(false);
    expect(isRetryable(f('not_found'), read, 2_000)).toBe(false);
    expect(isRetryable(f('auth'), read, 2_000)).toBe(false);
    expect(isRetryable(f('bad_response'), read, 2_000)).toBe(false);
  });

  it('retries idempotent writes on an answer (429, 5xx) or when nothing left, never after a lost answer', () => {
    expect(isRetryable(f('server_error'), idemWrite, 2_000)).toBe(true);
    expect(isRetryable(f('server_error'), write, 2_000)).toBe(false);
    expect(isRetryable(f('timeout'), idemWrite, 2_000)).toBe(false);
    expect(isRetryable(f('network'), idemWrite, 2_000)).toBe(false);
    expect(isRetryable(f('bad_response'), idemWrite, 2_000)).toBe(false);
    expect(isRetryable(f('rejected'), idemWrite, 2_000)).toBe(false);
    expect(isRetryable(f('network', { requestSent: false }), idemWrite, 2_000)).toBe(true);
    expect(isRetryable(f('rate_limited'), idemWrite, 2_000)).toBe(true);
    expect(isRetryable(f('network', { requestSent: false }), write, 2_000)).toBe(false);
  });

  it('retries a 5xx only when the wait it names (Retry-After) is within the cap, as a 429', () => {
    expect(isRetryable(f('server_error', { vendorStatus: 503, retryAfterMs: 2_000 }), read, 2_000)).toBe(true);
    expect(isRetryable(f('server_error', { vendorStatus: 503, retryAfterMs: 600_000 }), read, 2_000)).toBe(false);
    expect(isRetryable(f('server_error', { vendorStatus: 503, retryAfterMs: 2_001 }), idemWrite, 2_000)).toBe(false);
    expect(isRetryable(f('server_error', { vendorStatus: 503, retryAfterMs: 1_000 }), idemWrite, 2_000)).toBe(true);
    // A write that is not idempotent is never resent, whatever the wait.
    expect(isRetryable(f('server_error', { vendorStatus: 503, retryAfterMs: 0 }), write, 2_000)).toBe(false);
  });

  it('counts only vendor health failures against the breaker', () => {
    expect(countsAgainstBreaker(f('server_error'))).toBe(true);
    expect(countsAgainstBreaker(f('timeout'))).toBe(true);
    expect(countsAgainstBreaker(f('not_found'))).toBe(false);
    expect(countsAgainstBreaker(f('rejected'))).toBe(false);
    expect(countsAgainstBreaker(f('auth'))).toBe(false);
    // The gateway's own failure (its token store's database) says nothing about the vendor.
    expect(countsAgainstBreaker({ ...f('network'), local: true })).toBe(false);
    // A POST's outcome unknown after an answer below 500 (Nango: 400 base_url_override_*): the vendor answered.
    expect(countsAgainstBreaker({ ...f('network'), vendorStatus: 400 })).toBe(false);
    expect(countsAgainstBreaker({ ...f('network'), vendorStatus: 502 })).toBe(true);
    expect(countsAgainstBreaker(f('network'))).toBe(true);
    expect(countsAgainstBreaker({ ...f('timeout'), local: true })).toBe(false);
  });
});

describe('refusedInput: the ledger\'s vendor_refused and the model\'s "same input fails the same way"', () => {
  // Nothing pinned it until a mutation review dropped `too_large` (a result over the cap told "it may work later": the
  // agent resends the same oversized read for ever) and `key_conflict` from it and every spec still passed.
  it('a refusal of the input is refused; trouble on the vendor\'s side or on the way is not', () => {
    for (const kind of ['rejected', 'not_found', 'auth', 'too_large', 'key_conflict'] as const) expect(refusedInput(f(kind)), kind).toBe(true);
    for (const kind of ['server_error', 'timeout', 'network', 'bad_response', 'rate_limited', 'in_progress'] as const) expect(refusedInput(f(kind)), kind).toBe(false);
  });
});
