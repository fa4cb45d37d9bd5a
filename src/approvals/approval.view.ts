import { inputWarnings } from './input-warnings.js';

/** An approval_requests row as read by SQL, and the API's view of it (API.md §5). */
export interface ApprovalRecord {
  id: string;
  org_id: string;
  tool_call_id: string;
  run_id: string;
  kind: 'expert' | 'client';
  status: string;
  tool_name: string;
  action: string;
  input_redacted: unknown;
  input_shown_exactly: boolean | null;
  risk_level: string;
  reason: string;
  action_digest: string;
  created_at: Date;
  expires_at: Date;
  decided_by: string | null;
  /** the role of the key that decided: expert, admin, agent (a client approval, or a run ended by its agent) */
  decided_role: string | null;
  decided_at: Date | null;
  decision_reason: string | null;
  /** its call as it is now (one look-up of tool_calls), for an expert who cannot read the ledger: its state and code, and the agent key that posted it (who asked) */
  tool_call: { status: string; errorCode: string | null; requestedBy: string | null } | null;
  /** the run's specialist */
  specialist_id: string | null;
  /**
   * the policy rule that asked for the approval (null: the catalog's default for the risk): the call's first decision
   * to ask, not the call's current one (an approved call decided again under a changed policy may be blocked by another).
   * The one with no earlier one, over the call's few decisions (policy_decisions_call_idx), not a sorted subquery nor an
   * ordered aggregate (PostgreSQL 16 on plans a Sort under it): a listing page's plan holds no Sort node
   * (listing-plans.spec.ts: a Sort there was the listing's own, linear in the org's history)
   */
  rule_id: string | null;
}

export const APPROVAL_COLUMNS = `id, org_id, tool_call_id, run_id, kind, status, tool_name, action, input_redacted, input_shown_exactly, risk_level, reason,
  action_digest, created_at, expires_at, decided_by, decided_role, decided_at, decision_reason,
  (SELECT jsonb_build_object('status', t.status, 'errorCode', t.error_code, 'requestedBy', t.actor_key_id)
     FROM tool_calls t WHERE t.id = approval_requests.tool_call_id) AS tool_call,
  (SELECT r.specialist_id FROM agent_runs r WHERE r.id = approval_requests.run_id) AS specialist_id,
  (SELECT d.rule_id FROM policy_decisions d WHERE d.tool_call_id = approval_requests.tool_call_id
      AND d.decision IN ('require_expert_approval', 'require_client_approval')
      AND NOT EXISTS (SELECT 1 FROM policy_decisions e WHERE e.tool_call_id = d.tool_call_id
                        AND e.decision IN ('require_expert_approval', 'require_client_approval') AND (e.created_at, e.id) < (d.created_at, d.id))
    LIMIT 1) AS rule_id`;

/**
 * The API's view. Given the time, a pending approval past its expiry is shown expired: that is
 * what deciding it now answers (the settle statement judges expiry itself), though the sweep that
 * writes it down runs only every few seconds. Without it (the ledger bench timing the story's
 * reads), the row as stored.
 */
export function approvalView(a: ApprovalRecord, nowMs?: number) {
  const overdue = nowMs !== undefined && a.status === 'pending' && a.expires_at.getTime() <= nowMs;
  // Shown expired, its call is shown as every read of the call answers it (blocked, APPROVAL_EXPIRED), not as still
  // waiting: the expiry is written down on both together (the sweep, or the first read of the call).
  const callShownBlocked = overdue && a.tool_call?.status === 'waiting_approval';
  return {
    id: a.id,
    orgId: a.org_id,
    toolCallId: a.tool_call_id,
    runId: a.run_id,
    kind: a.kind,
    status: overdue ? 'expired' : a.status,
    toolName: a.tool_name,
    action: a.action,
    inputRedacted: a.input_redacted,
    // false: what inputRedacted shows is not all of what runs (a value hidden, cut or replaced); null: not recorded (an
    // approval made before this was)
    inputShownExactly: a.input_shown_exactly,
    // What a screen may draw otherwise than it runs (invisible or direction-changing characters, look-alike letters).
    inputWarnings: inputWarnings(a.input_redacted),
    requestedBy: a.tool_call?.requestedBy ?? null,
    specialistId: a.specialist_id,
    ruleId: a.rule_id,
    riskLevel: a.risk_level,
    reason: a.reason,
    actionDigest: a.action_digest,
    createdAt: a.created_at.toISOString(),
    expiresAt: a.expires_at.toISOString(),
    decidedBy: a.decided_by,
    decidedRole: a.decided_role,
    decidedAt: a.decided_at?.toISOString() ?? null,
    decisionReason: a.decision_reason,
    // What became of the call: an approval stays `approved` though the call it let through was then blocked (the flag
    // turned off, a policy added, the run ended) or failed at the vendor; the expert sees it here.
    toolCallStatus: callShownBlocked ? 'blocked' : (a.tool_call?.status ?? null),
    toolCallErrorCode: callShownBlocked ? 'APPROVAL_EXPIRED' : (a.tool_call?.errorCode ?? null),
  };
}
