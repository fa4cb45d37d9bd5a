import { hasFinalStatusClass, type SideEffect, type ToolActionSpec, type VendorFailureKind, type VendorOutcome } from '../vendors/vendor-handler.js';
import type { ExecutionErrorCode } from './execution-outcome.js';

type Failure = Extract<VendorOutcome, { ok: false }>;
/** What the mapping needs to know of the catalog action. */
type ActionKind = Pick<ToolActionSpec, 'sideEffect' | 'overwrite'>;

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
  // Only writes carry an idempotency key; for a write both are OUTCOME_UNKNOWN (below).
  in_progress: 'VENDOR_ERROR',
  key_conflict: 'VENDOR_ERROR',
};

/**
 * A 2xx says the vendor accepted the request, and usually acted on it. A 4xx
 * is a refusal and a 5xx a vendor failure, which the handlers classify by
 * status without reading the body, so an unusable body there changes nothing.
 */
function acceptedByVendor(status: number | undefined): boolean {
  return status !== undefined && status >= 200 && status < 300;
}

/**
 * Redirects are not followed, so a 3xx is all the gateway learns, and to a
 * write it does not say "refused": a 303 See Other is how a server answers a
 * POST it has processed (the result is elsewhere). Whatever kind the handler
 * gave it, the vendor had the request and may have acted.
 */
function redirected(status: number | undefined): boolean {
  return status !== undefined && status >= 300 && status < 400;
}

/**
 * An answer whose status line has no final HTTP class ("HTTP/1.1 000", "099": Node hands on 0 and 99), whatever kind
 * the handler gave it: not a refusal the vendor made (a 4xx, or its own refusal inside a 2xx), so it says nothing of
 * whether a write took effect, and nothing about the input either.
 */
function unclassified(status: number | undefined): boolean {
  return status !== undefined && !hasFinalStatusClass(status);
}

/**
 * A write that may have taken effect, and nobody knows whether it did: the
 * answer never came (timeout, reset after sending), came but cannot be read (a
 * 2xx whose body is not JSON, cut off or over the size cap) or points elsewhere
 * (a redirect, not followed) or has a status no HTTP class covers, or the
 * vendor said an earlier attempt under the same idempotency key reached it
 * (still in progress, or the key was used with other parameters), or it
 * answered 5xx —
 * an edge or gateway error may come back while the vendor goes on to apply
 * the request (VENDORS.md §1.9 point 4) — unless the action is an overwrite,
 * which a second call leaves in the same state. Calling any of these `failed`
 * would invite a retry under a new key: a second side effect.
 *
 */
export function isUnknownWriteOutcome(f: Failure, action: ActionKind): boolean {
  if (action.sideEffect !== 'write' || !f.requestSent) return false;
  if (redirected(f.vendorStatus) || unclassified(f.vendorStatus)) return true;
  switch (f.kind) {
    case 'timeout':
    case 'network':
    case 'in_progress':
    case 'key_conflict':
      return true;
    case 'server_error':
      return action.overwrite !== true;
    case 'bad_response':
    case 'too_large':
      return acceptedByVendor(f.vendorStatus);
    default:
      return false;
  }
}

export function errorCodeFor(f: Failure, action: ActionKind): ExecutionErrorCode {
  // The gateway's own database failing before anything was sent (its token store, a refund's lease, the credentials
  // check) is the gateway's failure, not the vendor's: EXECUTION_ERROR ("not sent"), never VENDOR_ERROR, which sent
  // the agent and the on-call looking at a vendor that was never asked.
  // Credentials deleted while the call waited to send: what a call started a moment later is told.
  if (f.local && f.credentialsGone) return 'CREDENTIALS_NOT_FOUND';
  if (f.local && f.kind === 'network') return 'EXECUTION_ERROR';
  return isUnknownWriteOutcome(f, action) ? 'OUTCOME_UNKNOWN' : CODE[f.kind];
}

/**
 * The failure a call that did not succeed is reported by, from its failed
 * attempts in order: the last one, unless an attempt of a write may have taken
 * effect — then the call stays OUTCOME_UNKNOWN whatever came after (a later
 * refusal does not undo it), reported by the latest attempt the vendor said
 * it received ("in progress", then a 503 on the next poll → the "in
 * progress"), or else by the latest that may have taken effect.
 */
export function decisiveFailure(attempts: readonly Failure[], action: ActionKind): Failure {
  const last = attempts.at(-1);
  if (!last) throw new Error('decisiveFailure needs at least one failed attempt');
  const unknown = attempts.filter((a) => isUnknownWriteOutcome(a, action));
  // The vendor's own word that an attempt reached it says more than a lost or 5xx answer.
  const decisive = unknown.findLast(reachedVendor) ?? unknown.at(-1);
  if (decisive) return decisive;
  // A retry that the gateway's own trouble stopped before it left says nothing of the call: the vendor's last answer
  // does (a 429, then the refund lease's statement failing, is the 429, not "nothing was sent").
  if (last.local) return attempts.findLast((a) => !a.local && (a.requestSent || a.vendorStatus !== undefined)) ?? last;
  return last;
}

/** The vendor said it has (or is running) an attempt: "in progress", the key already used, a 2xx or a redirect. */
function reachedVendor(f: Failure): boolean {
  if (!f.requestSent) return false;
  return f.kind === 'in_progress' || f.kind === 'key_conflict' || redirected(f.vendorStatus) || ((f.kind === 'bad_response' || f.kind === 'too_large') && acceptedByVendor(f.vendorStatus));
}

/** "In progress" is not a failure to give up on: it is polled within the call's budget, outside VENDOR_MAX_RETRIES. */
export function isPoll(f: Failure): boolean {
  return f.kind === 'in_progress';
}

/**
 * May this failure be retried? Only idempotent actions (VENDORS.md §5), and
 * only on a transient failure: 429/THROTTLED, a 5xx answer, or a network
 * failure or timeout. A wait the vendor named longer than the cap is not slept
 * on, after a 429 (it goes back to the agent) as after a 5xx: a 503's
 * Retry-After says how long the vendor expects to be down (RFC 9110
 * §10.2.3), and asking again sooner only adds to its load. A 5xx is an
 * answer, and resending an idempotent request leaves the same state (the
 * note's final text; the refund's same @idempotent key). A write whose answer
 * never came after it was sent, or came unreadable, is different: nobody
 * knows whether it happened, so it is never resent blindly (it ends
 * indeterminate). The one exception is the vendor saying the request
 * under this key is still in progress: asking again with the same key is what
 * the vendor wants (VENDORS.md §1.9 point 6), and may hand back the result.
 */
export function isRetryable(f: Failure, action: { idempotent: boolean; sideEffect: SideEffect }, retryAfterCapMs: number): boolean {
  if (!action.idempotent) return false;
  // The gateway's own trouble (a refund lease another call holds past its wait, the token store down) is not
  // cured by asking the vendor again within the call: a retry would only wait again, into the send's budget.
  if (f.local) return false;
  // "In progress" names no wait: its retryAfterMs is the gateway's own poll interval (IN_PROGRESS_POLL_MS), not a
  // vendor's Retry-After, which is all VENDOR_RETRY_AFTER_CAP_MS bounds. The call's budget bounds the polls.
  if (f.kind === 'in_progress') return true;
  if (f.kind === 'rate_limited' || f.kind === 'server_error') return f.retryAfterMs === undefined || f.retryAfterMs <= retryAfterCapMs;
  if (f.kind !== 'timeout' && f.kind !== 'network') return false;
  return action.sideEffect === 'read' || !f.requestSent;
}

/**
 * Did the vendor refuse the input itself, so that the same input fails the same way (a 4xx, Shopify's userErrors
 * in a 200, a result over the cap)? Otherwise the trouble was on its side or on the way, and may pass. The HTTP
 * status alone cannot tell: a 200 also carries GraphQL INTERNAL_SERVER_ERROR or an unreadable body.
 */
export function refusedInput(f: Failure): boolean {
  if (unclassified(f.vendorStatus)) return false;
  return f.kind === 'rejected' || f.kind === 'not_found' || f.kind === 'auth' || f.kind === 'too_large' || f.kind === 'key_conflict';
}

/** Failures that say something about the vendor's health (they feed the circuit breaker). */
export function countsAgainstBreaker(f: Failure): boolean {
  if (f.local) return false; // the gateway's own trouble says nothing about the vendor's health
  // A readable answer whose outcome is unknown (a refund's payment transaction in ERROR): the vendor answered well.
  if (f.answerRead) return false;
  // A write's outcome made unknown by an answer below 500 (Nango refusing a POST's redirect with a 400) is
  // unknown for the call, but the vendor answered: nothing about its health.
  if (f.kind === 'network' && f.vendorStatus !== undefined && f.vendorStatus < 500) return false;
  return f.kind === 'server_error' || f.kind === 'timeout' || f.kind === 'network' || f.kind === 'bad_response';
}
