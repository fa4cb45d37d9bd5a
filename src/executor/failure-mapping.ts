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
 * May this failure be retried? Only idempotent actions; reads on any transient
 * failure; writes only when the vendor provably did not act on the request
 * (it never left, or the vendor refused it with 429). A long Retry-After is not
 * slept on: it goes back to the agent.
 */
export function isRetryable(f: Failure, action: { idempotent: boolean; sideEffect: SideEffect }, retryAfterCapMs: number): boolean {
  if (!action.idempotent) return false;
  if (f.kind === 'rate_limited') return f.retryAfterMs === undefined || f.retryAfterMs <= retryAfterCapMs;
  const transient = f.kind === 'server_error' || f.kind === 'timeout' || f.kind === 'network';
  if (!transient) return false;
  return action.sideEffect === 'read' || !f.requestSent;
}

/** Failures that say something about the vendor's health (they feed the circuit breaker). */
export function countsAgainstBreaker(f: Failure): boolean {
  return f.kind === 'server_error' || f.kind === 'timeout' || f.kind === 'network' || f.kind === 'bad_response';
}
