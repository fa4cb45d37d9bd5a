/**
 * The claim of an approved call (approved → running | blocked), in one
 * statement that is safe to send again after its answer was lost.
 *
 * - The conditional update (status = 'approved') is what lets exactly one
 *   caller — the approver's request, a sweep, another replica — win.
 * - The org's `tool_calling_enabled` flag is re-read here: turned off since the
 *   call was submitted, the call ends blocked / FEATURE_DISABLED (its raw input
 *   deleted) and nothing reaches the vendor.
 * - The encrypted raw input comes back with the claim: no statement stands
 *   between a committed claim and the vendor call, so no database error can
 *   leave a claimed call `running` with no request sent (the orphan sweep would
 *   then call it indeterminate, "the request may have reached the vendor").
 * - The claim's event carries the id the caller chose ($3), its claim token.
 *   A resend after a lost answer (the first attempt may have committed) finds
 *   the call no longer approved, but finds that event: the claim is ours, and
 *   the call comes back as if just claimed, its started_at reset (the orphan
 *   sweep measures from it; the vendor request starts only now). A claim won by
 *   anyone else has another event id, so a resend never takes over theirs.
 * - $4 false: only that resumption, no new claim (the gateway began stopping
 *   between the attempts).
 *
 * The tc and re updates cannot both touch the row: on the statement's snapshot
 * it is either approved (tc) or running with our event (re), never both.
 *
 * $1 the call, $2 the HTTP status of a FEATURE_DISABLED block, $3 the claim
 * token (a fresh uuid per claim, resends included), $4 whether a new claim may
 * be made.
 */
export const CLAIM_APPROVED_CALL_SQL = `
  WITH f AS (
    SELECT COALESCE((SELECT ff.enabled FROM feature_flags ff
                      WHERE ff.org_id = t.org_id AND ff.flag = 'tool_calling_enabled'), false) AS enabled
      FROM tool_calls t WHERE t.id = $1),
  tc AS (
    UPDATE tool_calls SET
      status = CASE WHEN f.enabled THEN 'running' ELSE 'blocked' END,
      error_code = CASE WHEN f.enabled THEN NULL ELSE 'FEATURE_DISABLED' END,
      http_status = CASE WHEN f.enabled THEN 200 ELSE $2 END,
      started_at = CASE WHEN f.enabled THEN now() END,
      finished_at = CASE WHEN f.enabled THEN NULL ELSE now() END,
      updated_at = now()
     FROM f WHERE id = $1 AND status = 'approved' AND $4::boolean
     RETURNING id, org_id, run_id, tool_name, action, action_digest, idempotency_key, tool_use_id, status),
  ti AS (DELETE FROM tool_call_inputs i USING tc WHERE i.tool_call_id = tc.id AND tc.status = 'blocked'),
  ev AS (
    INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, metadata)
    SELECT $3::uuid, org_id, CASE status WHEN 'running' THEN 'tool_call.started' ELSE 'tool_call.blocked' END, run_id, id,
           jsonb_build_object('toolName', tool_name, 'action', action, 'digest', action_digest, 'afterApproval', true)
             || CASE status WHEN 'running' THEN '{}'::jsonb ELSE '{"errorCode": "FEATURE_DISABLED", "reason": "feature_disabled"}'::jsonb END
      FROM tc),
  re AS (
    UPDATE tool_calls t SET started_at = now(), updated_at = now()
     WHERE t.id = $1 AND t.status = 'running'
       AND EXISTS (SELECT 1 FROM runtime_ledger_events e WHERE e.id = $3::uuid AND e.tool_call_id = $1)
     RETURNING t.id, t.org_id, t.run_id, t.tool_name, t.action, t.action_digest, t.idempotency_key, t.tool_use_id, t.status),
  claimed AS (SELECT * FROM tc UNION ALL SELECT * FROM re)
  SELECT c.*, i.key_id, i.iv, i.ciphertext, i.auth_tag
    FROM claimed c
    LEFT JOIN tool_call_inputs i ON i.tool_call_id = c.id AND i.org_id = c.org_id AND c.status = 'running'`;
