import type { AppError } from '../../common/errors/app-error.js';
import type { ErrorCode } from '../../common/errors/error-codes.js';
import type { ScheduleKind } from './batch-request.js';

/**
 * Whether a batch item answered with this problem (no outcome recorded for it) may still reach its vendor when
 * the batch is sent again. A write that may holds the writes after it (ToolCallBatchService): run now, a later
 * write would reach its vendor first, and the resend would run the earlier one after it. A write refused for
 * good is refused again on every resend, so nothing can overtake it: it holds nothing, like a recorded outcome
 * (blocked, failed), which a resend replays and never runs. One exception, decided apart (keyReusedHold): a 422
 * IDEMPOTENCY_KEY_REUSED never runs, but the call first sent under its id (if a write) may not have run yet.
 *
 * An exhaustive switch: a new error code needs a decision here before it compiles.
 */
export function mayRunOnResend(code: ErrorCode): boolean {
  switch (code) {
    // Refused for a while, before anything was recorded: the org × vendor slot, the database (its intent, or its
    // outcome: then it ran and a resend finds it still executing), governance changing under it, the shutdown.
    // Or still executing (a resend), not started behind another item, or nobody knows (INTERNAL): the safe side.
    case 'CONCURRENCY_LIMIT':
    case 'RATE_LIMITED':
    case 'DATABASE_UNAVAILABLE':
    case 'CONFLICT':
    case 'GATEWAY_STOPPING':
    case 'IDEMPOTENCY_IN_PROGRESS':
    case 'INTERNAL':
      return true;
    // Refused for good: the same tool_use gets the same answer every time (an ended run, a revoked key, an id
    // already used for another action, not a tool_use at all), or the code is never a batch item's. The id
    // used for another action still holds the writes after it while that action has not run (keyReusedHold).
    case 'BAD_REQUEST':
    case 'VALIDATION_FAILED':
    case 'UNAUTHENTICATED':
    case 'FORBIDDEN':
    case 'FEATURE_DISABLED':
    case 'NOT_IN_MANIFEST':
    case 'POLICY_BLOCKED':
    case 'EXPERT_REJECTED':
    case 'CLIENT_REJECTED':
    case 'APPROVAL_EXPIRED':
    case 'APPROVAL_REVOKED':
    case 'NOT_FOUND':
    case 'RUN_NOT_FOUND':
    case 'RUN_NOT_ACTIVE':
    case 'APPROVAL_ALREADY_DECIDED':
    case 'ACTION_DIGEST_MISMATCH':
    case 'NOT_RECONCILABLE':
    case 'PRECONDITION_FAILED':
    case 'PAYLOAD_TOO_LARGE':
    case 'UNSUPPORTED_MEDIA_TYPE':
    case 'INVALID_INPUT':
    case 'IDEMPOTENCY_KEY_REUSED':
      return false;
  }
}

/** The call first stored under the id of a 422 IDEMPOTENCY_KEY_REUSED, as StoredCallAnswers.replayStored attaches it. */
export interface ReusedKeyStoredCall {
  status: string;
  toolName: string;
  action: string;
}

/** The stored call attached to a 422 IDEMPOTENCY_KEY_REUSED (never serialized into it), or null. */
export function reusedKeyStoredCall(e: AppError): ReusedKeyStoredCall | null {
  if (e.code !== 'IDEMPOTENCY_KEY_REUSED') return null;
  const stored = (e as AppError & { storedCall?: Partial<ReusedKeyStoredCall> }).storedCall;
  if (typeof stored?.status !== 'string' || typeof stored.toolName !== 'string' || typeof stored.action !== 'string') return null;
  return { status: stored.status, toolName: stored.toolName, action: stored.action };
}

/**
 * What a batch item refused 422 IDEMPOTENCY_KEY_REUSED (resent under its tool_use id with another input) puts on
 * the writes after it. The resend itself never runs, but the call first sent under that id may not have run yet:
 * if that call is a write, released now, a later write would reach its vendor before it. So it holds them as
 * that call would, answered as itself: waiting for approval ('approval', as a 202 item) or still to run or
 * running ('executing', as a 409 in progress). Decided by the stored call's kind (`kindOf`, the batch's rule from
 * the catalog), never the resent item's: a lookup resent under a refund's id still waits for the refund, and a
 * write resent under a lookup's id holds nothing. Settled, a read, or nothing stored known: nothing to hold.
 */
export function keyReusedHold(e: AppError, kindOf: (toolName: string, action: string) => ScheduleKind): 'approval' | 'executing' | null {
  const stored = reusedKeyStoredCall(e);
  if (!stored || kindOf(stored.toolName, stored.action) !== 'write') return null;
  if (stored.status === 'waiting_approval') return 'approval';
  if (stored.status === 'requested' || stored.status === 'approved' || stored.status === 'running') return 'executing';
  return null;
}
