import type { SideEffect, VendorFailureKind, VendorOutcome } from '../vendors/vendor-handler.js';
import type { ExecutionErrorCode } from './execution-outcome.js';

type Failure = Extract<VendorOutcome, { ok: false }>;

const CODE: Record<VendorFailureKind, ExecutionErrorCode> = {
  not_found: 'VENDOR_NOT_FOUND',
  auth: 'CREDENTIALS_INVALID',
  rate_limited: 'VENDOR_RATE_LIMITED',
  server_error: 'VENDOR_ERROR',
  timeout: 'VENDOR_TIMEOUT',
  network: 'VENDOR_ERROR',
  bad_response: 'VENDOR_ERROR',
  too_large: 'VENDOR_ERROR',
  rejected: 'VENDOR_ERROR',
};

/** A write that may have reached the vendor and whose answer never came: nobody knows if it happened. */
export function isUnknownWriteOutcome(f: Failure, sideEffect: SideEffect): boolean {
  return sideEffect === 'write' && f.requestSent && (f.kind === 'timeout' || f.kind === 'network');
}

export function errorCodeFor(f: Failure, sideEffect: SideEffect): ExecutionErrorCode {
  return isUnknownWriteOutcome(f, sideEffect) ? 'OUTCOME_UNKNOWN' : CODE[f.kind];
}

/**
 * May this failure be retried? Only idempotent actions (VENDORS.md §5), and
 * only on a transient failure: 429/THROTTLED (a long Retry-After is not slept
 * on: it goes back to the agent), a 5xx answer, or a network failure or
 * timeout. A 5xx is an answer, and resending an idempotent request leaves the
 * same state (the note's final text; the refund's same @idempotent key). A
 * write whose answer never came after it was sent is different: nobody knows
 * whether it happened, so it is never resent blindly (it ends indeterminate).
 */
export function isRetryable(f: Failure, action: { idempotent: boolean; sideEffect: SideEffect }, retryAfterCapMs: number): boolean {
  if (!action.idempotent) return false;
  if (f.kind === 'rate_limited') return f.retryAfterMs === undefined || f.retryAfterMs <= retryAfterCapMs;
  if (f.kind === 'server_error') return true;
  if (f.kind !== 'timeout' && f.kind !== 'network') return false;
  return action.sideEffect === 'read' || !f.requestSent;
}

/** Failures that say something about the vendor's health (they feed the circuit breaker). */
export function countsAgainstBreaker(f: Failure): boolean {
  return f.kind === 'server_error' || f.kind === 'timeout' || f.kind === 'network' || f.kind === 'bad_response';
}
