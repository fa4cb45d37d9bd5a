import { describe, expect, it } from 'vitest';
import type { VendorOutcome } from '../vendors/vendor-handler.js';
import { idempotencyInProgress } from '../vendors/shopify/shopify.client.js';
import { countsAgainstBreaker, decisiveFailure, errorCodeFor, isRetryable, refusedInput } from './failure-mapping.js';

const WRITE = { sideEffect: 'write' as const, overwrite: false };
const READ = { sideEffect: 'read' as const };

type F = Extract<VendorOutcome, { ok: false }>;
const f = (kind: F['kind'], extra: Partial<F> = {}): F => ({ ok: false, kind, requestSent: true, message: kind, ...extra });
const idemWrite = { idempotent: true, sideEffect: 'write' as const };
const write = { idempotent: false, sideEffect: 'write' as const };

describe('failure mapping: writes that may have taken effect', () => {
  it('a 2xx whose body cannot be used is OUTCOME_UNKNOWN for a write, VENDOR_ERROR for a read; other statuses go by the status', () => {
    for (const kind of ['bad_response', 'too_large'] as const) {
      for (const vendorStatus of [200, 201, 202, 204, 299]) {
        expect(errorCodeFor(f(kind, { vendorStatus }), WRITE), `${kind} ${vendorStatus}`).toBe('OUTCOME_UNKNOWN');
        expect(errorCodeFor(f(kind, { vendorStatus }), READ), `${kind} ${vendorStatus}`).toBe('VENDOR_ERROR');
      }
    }
    // A refusal or a vendor failure is one whatever its body: still failed.
    for (const vendorStatus of [400, 404, 422, 429, 500, 503]) {
      expect(errorCodeFor(f('too_large', { vendorStatus }), WRITE), String(vendorStatus)).toBe('VENDOR_ERROR');
    }
    // Nothing left (the read before the mutation answered badly), or no answer at all.
    expect(errorCodeFor(f('bad_response', { vendorStatus: 200, requestSent: false }), WRITE)).toBe('VENDOR_ERROR');
    expect(errorCodeFor(f('bad_response'), WRITE)).toBe('VENDOR_ERROR');
  });

  it('a write answered with a redirect (not followed; 303 See Other comes after a processed POST) is OUTCOME_UNKNOWN whatever its kind; a read stays VENDOR_ERROR', () => {
    for (const vendorStatus of [301, 302, 303, 307, 308]) {
      for (const kind of ['rejected', 'bad_response', 'too_large'] as const) {
        expect(errorCodeFor(f(kind, { vendorStatus }), WRITE), `${kind} ${vendorStatus}`).toBe('OUTCOME_UNKNOWN');
        expect(errorCodeFor(f(kind, { vendorStatus }), { sideEffect: 'write', overwrite: true }), `${kind} ${vendorStatus}`).toBe('OUTCOME_UNKNOWN');
        expect(errorCodeFor(f(kind, { vendorStatus }), READ), `${kind} ${vendorStatus}`).toBe('VENDOR_ERROR');
      }
    }
    // Never resent, and once seen the call stays unknown whatever a later attempt says.
    const redirect = f('rejected', { vendorStatus: 303 });
    expect(isRetryable(redirect, idemWrite, 2_000)).toBe(false);
    expect(decisiveFailure([f('in_progress', { vendorStatus: 200 }), redirect], WRITE)).toBe(redirect);
  });

  it('a write answered with a status no HTTP class covers ("HTTP/1.1 000", "099", a final 1xx, 600+) is OUTCOME_UNKNOWN whatever its kind, never "refused"; a read stays VENDOR_ERROR', () => {
    for (const vendorStatus of [0, 99, 100, 199, 600, 999]) {
      for (const kind of ['rejected', 'bad_response', 'too_large', 'server_error', 'not_found'] as const) {
        expect(errorCodeFor(f(kind, { vendorStatus }), WRITE), `${kind} ${vendorStatus}`).toBe('OUTCOME_UNKNOWN');
        expect(errorCodeFor(f(kind, { vendorStatus }), { sideEffect: 'write', overwrite: true }), `${kind} ${vendorStatus}`).toBe('OUTCOME_UNKNOWN');
      }
      expect(errorCodeFor(f('rejected', { vendorStatus }), READ), String(vendorStatus)).toBe('VENDOR_ERROR');
      // Not the vendor refusing the input: the ledger's vendor_refused stays false, and the model is not told "the same input fails".
      expect(refusedInput(f('rejected', { vendorStatus })), String(vendorStatus)).toBe(false);
      // Never resent blindly.
      expect(isRetryable(f('rejected', { vendorStatus }), idemWrite, 2_000), String(vendorStatus)).toBe(false);
    }
    // The vendor's own refusals are still refusals: a 4xx, and a refusal carried in a 2xx (Shopify's userErrors).
    for (const vendorStatus of [200, 400, 404, 422]) {
      expect(errorCodeFor(f('rejected', { vendorStatus }), WRITE), String(vendorStatus)).toBe('VENDOR_ERROR');
      expect(refusedInput(f('rejected', { vendorStatus })), String(vendorStatus)).toBe(true);
    }
    // Nothing sent (a path refused before sending): no status, still a refusal.
    expect(errorCodeFor(f('rejected', { requestSent: false }), WRITE)).toBe('VENDOR_ERROR');
  });

  it('"in progress" is polled whatever VENDOR_RETRY_AFTER_CAP_MS: its wait is the gateway\'s own poll interval, not a vendor\'s Retry-After', () => {
    const inProgress = idempotencyInProgress(200);
    for (const cap of [0, 500, 999, 2_000]) expect(isRetryable(inProgress, idemWrite, cap), String(cap)).toBe(true);
    // Only for an idempotent write (same key); a 429 or 5xx wait past the cap is still not slept on.
    expect(isRetryable(inProgress, write, 2_000)).toBe(false);
    expect(isRetryable(f('rate_limited', { vendorStatus: 429, retryAfterMs: 1_000 }), idemWrite, 500)).toBe(false);
    expect(isRetryable(f('server_error', { vendorStatus: 503, retryAfterMs: 1_000 }), idemWrite, 500)).toBe(false);
  });

  it('a readable answer that leaves a write unknown (a refund whose payment transaction is ERROR) is OUTCOME_UNKNOWN but not against the breaker', () => {
    const refund = f('bad_response', { vendorStatus: 200, answerRead: true });
    expect(errorCodeFor(refund, WRITE)).toBe('OUTCOME_UNKNOWN');
    expect(countsAgainstBreaker(refund)).toBe(false);
    // An answer that cannot be read still counts (README: "answers it cannot read").
    expect(countsAgainstBreaker(f('bad_response', { vendorStatus: 200 }))).toBe(true);
  });

  it('"in progress" and "key used with other parameters" mean an earlier attempt reached the vendor: OUTCOME_UNKNOWN, breaker-neutral', () => {
    expect(errorCodeFor(f('in_progress', { vendorStatus: 200, retryAfterMs: 1_000 }), WRITE)).toBe('OUTCOME_UNKNOWN');
    expect(errorCodeFor(f('key_conflict', { vendorStatus: 200 }), WRITE)).toBe('OUTCOME_UNKNOWN');
    // Neither says anything about the vendor's health.
    expect(countsAgainstBreaker(f('in_progress'))).toBe(false);
    expect(countsAgainstBreaker(f('key_conflict'))).toBe(false);
  });

  it('"in progress" is polled under the same key; a key conflict and unusable 2xx answers are never resent', () => {
    expect(isRetryable(f('in_progress', { retryAfterMs: 1_000 }), idemWrite, 2_000)).toBe(true);
    // Its wait is the gateway's own poll interval, not a vendor's Retry-After: the cap does not refuse it (the budget bounds it).
    expect(isRetryable(f('in_progress', { retryAfterMs: 5_000 }), idemWrite, 2_000)).toBe(true);
    expect(isRetryable(f('in_progress', { retryAfterMs: 1_000 }), write, 2_000)).toBe(false);
    expect(isRetryable(f('key_conflict'), idemWrite, 2_000)).toBe(false);
    expect(isRetryable(f('bad_response', { vendorStatus: 200 }), idemWrite, 2_000)).toBe(false);
    expect(isRetryable(f('too_large', { vendorStatus: 201 }), idemWrite, 2_000)).toBe(false);
  });

  it('once an attempt of a write may have taken effect, a later failure does not make the call failed', () => {
    const gateway = f('server_error', { vendorStatus: 504 });
    const inProgress = f('in_progress', { vendorStatus: 200, retryAfterMs: 1_000 });
    const unavailable = f('server_error', { vendorStatus: 503 });
    const limited = f('rate_limited', { vendorStatus: 429, retryAfterMs: 60_000 });
    expect(decisiveFailure([gateway, inProgress, unavailable], WRITE)).toBe(inProgress);
    expect(decisiveFailure([inProgress, limited], WRITE)).toBe(inProgress);
    expect(errorCodeFor(decisiveFailure([gateway, inProgress, unavailable], WRITE), WRITE)).toBe('OUTCOME_UNKNOWN');
    // The latest unknown one when there are several.
    const later = f('in_progress', { vendorStatus: 200, message: 'later' });
    expect(decisiveFailure([inProgress, later, unavailable], WRITE)).toBe(later);
    // Otherwise the last attempt decides, and reads always go by the last one.
    expect(decisiveFailure([gateway, unavailable], WRITE)).toBe(unavailable);
    expect(decisiveFailure([inProgress, unavailable], READ)).toBe(unavailable);
  });

  it('a retry the gateway\'s own trouble stopped before it left is not the call\'s failure when the vendor answered an earlier attempt', () => {
    const limited = f('rate_limited', { vendorStatus: 429, retryAfterMs: 100 });
    const lease = f('network', { requestSent: false, local: true });
    expect(decisiveFailure([limited, lease], WRITE)).toBe(limited);
    expect(errorCodeFor(decisiveFailure([limited, lease], WRITE), WRITE)).toBe('VENDOR_RATE_LIMITED');
    // Nothing answered before it (a refused connect is no answer): the gateway's failure decides.
    expect(decisiveFailure([lease], READ)).toBe(lease);
    const refused = f('network', { requestSent: false });
    expect(decisiveFailure([refused, lease], READ)).toBe(lease);
  });
});
