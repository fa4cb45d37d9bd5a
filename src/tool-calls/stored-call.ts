import { EventEmitter } from 'node:events';
import type { ToolCallStatus } from './tool-call-status.js';

export interface StoredCall {
  id: string;
  org_id: string;
  run_id: string;
  tool_name: string;
  action: string;
  status: ToolCallStatus;
  error_code: string | null;
  error_text: string | null;
  http_status: number;
  action_digest: string;
  retry_after_seconds: number | null;
  /** When the outcome was recorded (null while unsettled): where a stored vendor wait counts down from (remainingWait). */
  finished_at: Date | null;
  vendor_status: number | null;
  vendor_refused: boolean | null;
  idempotency_key: string;
  tool_use_id: string;
  approval_kind: 'expert' | 'client' | null;
  /** When an expert or the customer rejected it: the decider's reason (redacted when given; null when none). */
  rejection_reason: string | null;
  /** While waiting_approval: when its pending approval expires (null for every other status — nothing read for them). */
  approval_expires_at: Date | null;
  /** Settled by ops (reconcile is the only writer of `note`). */
  reconciled: boolean;
  /** When succeeded: the size of its stored full result (null when none is stored, or it expired), what reading it back costs the key. */
  result_bytes: number | null;
}

export const STORED_CALL_COLUMNS = `t.id, t.org_id, t.run_id, t.tool_name, t.action, t.status, t.error_code, t.error_text, t.http_status,
  t.action_digest, t.retry_after_seconds, t.finished_at, t.vendor_status, t.vendor_refused, t.idempotency_key, t.tool_use_id, (t.note IS NOT NULL) AS reconciled,
  (SELECT kind FROM approval_requests a WHERE a.tool_call_id = t.id) AS approval_kind,
  CASE WHEN t.error_code IN ('EXPERT_REJECTED', 'CLIENT_REJECTED') THEN (SELECT decision_reason FROM approval_requests a WHERE a.tool_call_id = t.id) END
    AS rejection_reason,
  CASE WHEN t.status = 'waiting_approval' THEN (SELECT expires_at FROM approval_requests a WHERE a.tool_call_id = t.id AND a.status = 'pending') END
    AS approval_expires_at,
  CASE WHEN t.status = 'succeeded' THEN (SELECT size_bytes FROM tool_call_results r WHERE r.tool_call_id = t.id AND r.expires_at > now()) END AS result_bytes`;

/**
 * What is left, in whole seconds from `nowMs`, of the wait a vendor asked for when the call ended (VENDOR_RATE_LIMITED):
 * null once it has passed. A stored answer handed out again (a replay, GET …/result) counts it down, so a client
 * that waits it and sends the same tool_use again is not told to wait as long once more, for ever: a replay never
 * calls the vendor, and the retry the wait is for is a new tool call.
 */
export function remainingWait(seconds: number | null, finishedAt: Date | null, nowMs: number): number | null {
  if (seconds === null || seconds <= 0) return null;
  if (finishedAt === null) return seconds;
  const left = Math.ceil(seconds - Math.max(0, nowMs - finishedAt.getTime()) / 1000);
  return left >= 1 ? left : null;
}

/** Emits the id of every call this process settles (long-polls listen). */
export const settledCalls = new EventEmitter().setMaxListeners(0);
