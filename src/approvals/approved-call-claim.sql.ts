import { apiKeyLockSharedSql, governanceLocksSharedSql } from '../db/advisory-locks.js';

/**
 * The claim of an approved call (approved → running | blocked), in one
 * statement that is safe to send again after its answer was lost.
 *
 * - The conditional update (status = 'approved') is what lets exactly one
 *   caller — the approver's request, a sweep, another replica — win.
 * - The org's `tool_calling_enabled` flag is re-read here: turned off since the
 *   call was submitted, the call ends blocked / FEATURE_DISABLED (its raw input
 *   deleted) and nothing reaches the vendor.
 * - The call's run is re-read: ended since (on a replica of an earlier release
 *   that decided the approval as the run ended, or by a run end racing the
 *   decision), the call ends blocked / RUN_NOT_ACTIVE, as the run's end blocks
 *   the approved calls it finds.
 * - The key that approved the call is re-read: revoked since (an approver
 *   found rogue or compromised), its approval no longer stands and the call
 *   ends blocked / APPROVAL_REVOKED (its raw input deleted): a revocation
 *   answered 204 withdraws the approvals of that key whose calls have not
 *   started, as it stops every decision and write of the key.
 * - The org's policy was decided again by the caller, on the call's approved
 *   params, and the claim holds only while that policy version ($5) is still
 *   the org's: a block ends the call blocked / POLICY_BLOCKED (its raw input
 *   deleted, the blocking decision recorded and the call pointed at it); a
 *   policy replaced since (on any replica) claims nothing and answers the row
 *   as still `approved`, for the caller to decide again.
 * - The encrypted raw input is read, and the policy decided on it, before the
 *   claim: no statement stands between a committed claim and the vendor call,
 *   so no database error can leave a claimed call `running` with no request
 *   sent (the orphan sweep would then call it indeterminate, "the request may
 *   have reached the vendor").
 * - The claim's event carries the id the caller chose ($3), its claim token.
 *   A resend after a lost answer (the first attempt may have committed) finds
 *   the call no longer approved, but finds that event: the claim is ours, and
 *   the call comes back as if just claimed, its started_at reset (the orphan
 *   sweep measures from it; the vendor request starts only now). A claim won by
 *   anyone else has another event id, so a resend never takes over theirs.
 *   The run, the flag, the approver's key and the policy are judged again as
 *   for a new claim (f): a run end, a kill switch, a revocation or a block
 *   answered between the attempts is in force, and the resumed call comes
 *   back `running` with that code as its error_code, for the runner to settle
 *   as not sent (no running → blocked): it sends nothing.
 * - $4 false: only that resumption, no new claim (the gateway began stopping
 *   between the attempts).
 *
 * The flag, the policy version and the approver's key are read FOR SHARE (as
 * the intent statement reads the flag, the policy and its own key): the tc update may wait on the call's row (a run end, a
 * concurrent decision), and a flag or policy change made meanwhile must not
 * answer 200 (nor a revocation 204) while the claim, on its older snapshot,
 * then starts the call. The change waits for the claim instead: the call is blocked, or its
 * tool_call.started comes before the change. (A first policy has no row to
 * lock yet: a claim in flight as it is created may still hold under none.)
 * The org's flag and policy locks and the approver's key lock are taken shared
 * first (`fair`), so a change or a revocation waiting for claims in flight is
 * not passed by later ones (advisory-locks.ts, "Fair turns").
 *
 * The tc, re and stale parts cannot answer for the same row: on the
 * statement's snapshot it is either approved (tc on the current policy, stale
 * on a replaced one) or running with our event (re).
 *
 * $1 the call, $2 the HTTP status of a FEATURE_DISABLED block, $3 the claim
 * token (a fresh uuid per claim, resends included), $4 whether a new claim may
 * be made, $5 the policy version the caller decided on (0: none stored), $6
 * the id of the policy decision that blocks the call (null: it does not) with
 * $7 its risk level, $8 its rule id and $9 its reason, $10 the HTTP status of
 * a POLICY_BLOCKED block, $11 the HTTP status of an APPROVAL_REVOKED block, $12 that of a RUN_NOT_ACTIVE one, $13 how
 * long this replica may hold the call running (VENDOR_TIMEOUT_MS + STALE_RUNNING_MARGIN_MS: the orphan sweep's judge).
 */
export const CLAIM_APPROVED_CALL_SQL = `
  WITH fair AS (${governanceLocksSharedSql('(SELECT t.org_id FROM tool_calls t WHERE t.id = $1)')},
                       ${apiKeyLockSharedSql('(SELECT a.decided_by FROM approval_requests a WHERE a.tool_call_id = $1)')} AS approver),
  f AS (
    SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM agent_runs r WHERE r.id = t.run_id AND r.status IN ('running', 'waiting_approval') FOR KEY SHARE)
                  THEN 'RUN_NOT_ACTIVE'
                WHEN NOT COALESCE((SELECT ff.enabled FROM feature_flags ff
                                    WHERE ff.org_id = t.org_id AND ff.flag = 'tool_calling_enabled' FOR SHARE), false) THEN 'FEATURE_DISABLED'
                WHEN (SELECT k.revoked_at FROM api_keys k
                       WHERE k.id = (SELECT a.decided_by FROM approval_requests a WHERE a.tool_call_id = t.id) FOR SHARE) IS NOT NULL THEN 'APPROVAL_REVOKED'
                WHEN $6::uuid IS NOT NULL THEN 'POLICY_BLOCKED' END AS blocked_by,
           COALESCE((SELECT p.version FROM policies p WHERE p.org_id = t.org_id FOR SHARE), 0) = $5::int AS policy_current
      FROM tool_calls t, fair WHERE t.id = $1),
  tc AS (
    UPDATE tool_calls SET
      status = CASE WHEN f.blocked_by IS NULL THEN 'running' ELSE 'blocked' END,
      error_code = f.blocked_by,
      http_status = CASE f.blocked_by WHEN 'FEATURE_DISABLED' THEN $2 WHEN 'POLICY_BLOCKED' THEN $10 WHEN 'APPROVAL_REVOKED' THEN $11 WHEN 'RUN_NOT_ACTIVE' THEN $12 ELSE 200 END,
      policy_decision_id = CASE WHEN f.blocked_by = 'POLICY_BLOCKED' THEN $6::uuid ELSE policy_decision_id END,
      risk_level = CASE WHEN f.blocked_by = 'POLICY_BLOCKED' THEN $7::text ELSE risk_level END,
      started_at = CASE WHEN f.blocked_by IS NULL THEN now() END,
      stale_after_ms = CASE WHEN f.blocked_by IS NULL THEN $13::int END,
      finished_at = CASE WHEN f.blocked_by IS NULL THEN NULL ELSE now() END,
      updated_at = now()
     FROM f WHERE id = $1 AND status = 'approved' AND $4::boolean AND f.policy_current
     RETURNING id, org_id, run_id, tool_name, action, action_digest, idempotency_key, tool_use_id, status, error_code),
  ti AS (DELETE FROM tool_call_inputs i USING tc WHERE i.tool_call_id = tc.id AND tc.status = 'blocked'),
  pd AS (
    INSERT INTO policy_decisions (id, org_id, tool_call_id, decision, risk_level, rule_id, reason, action_digest)
    SELECT $6::uuid, org_id, id, 'block', $7::text, $8::text, $9::text, action_digest FROM tc WHERE error_code = 'POLICY_BLOCKED'),
  ev AS (
    INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, metadata)
    SELECT $3::uuid, org_id, CASE status WHEN 'running' THEN 'tool_call.started' ELSE 'tool_call.blocked' END, run_id, id,
           jsonb_build_object('toolName', tool_name, 'action', action, 'digest', action_digest, 'afterApproval', true)
             || CASE error_code
                  WHEN 'FEATURE_DISABLED' THEN '{"errorCode": "FEATURE_DISABLED", "reason": "feature_disabled"}'::jsonb
                  WHEN 'APPROVAL_REVOKED' THEN '{"errorCode": "APPROVAL_REVOKED", "reason": "approver_key_revoked"}'::jsonb
                  WHEN 'RUN_NOT_ACTIVE' THEN '{"errorCode": "RUN_NOT_ACTIVE", "reason": "run_ended"}'::jsonb
                  WHEN 'POLICY_BLOCKED' THEN jsonb_build_object('errorCode', 'POLICY_BLOCKED', 'reason', 'policy', 'ruleId', $8::text)
                  ELSE '{}'::jsonb END
      FROM tc),
  re AS (
    UPDATE tool_calls t SET started_at = now(), stale_after_ms = $13::int, updated_at = now()
      FROM f
     WHERE t.id = $1 AND t.status = 'running'
       AND EXISTS (SELECT 1 FROM runtime_ledger_events e WHERE e.id = $3::uuid AND e.tool_call_id = $1)
     RETURNING t.id, t.org_id, t.run_id, t.tool_name, t.action, t.action_digest, t.idempotency_key, t.tool_use_id, t.status, f.blocked_by AS error_code),
  stale AS (
    SELECT t.id, t.org_id, t.run_id, t.tool_name, t.action, t.action_digest, t.idempotency_key, t.tool_use_id, t.status, t.error_code
      FROM tool_calls t, f WHERE t.id = $1 AND t.status = 'approved' AND $4::boolean AND NOT f.policy_current)
  SELECT * FROM tc UNION ALL SELECT * FROM re UNION ALL SELECT * FROM stale`;
