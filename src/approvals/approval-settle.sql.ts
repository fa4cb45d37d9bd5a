import type { ApprovalKind, ApprovalStatus } from './approval-request.entity.js';

/**
 * One statement that settles approval requests and everything that hangs off
 * them: the approval row (only while still pending — the conditional update is
 * what makes a decision happen exactly once, even under a race or across
 * replicas), the ToolCall (waiting_approval → approved | blocked), the run's
 * pending count and status, the stored raw input (dropped unless approved),
 * and the events.
 *
 * `target` selects the approvals: one by id ($1) for a decision, or every
 * pending one whose expiry has passed for the sweep (of the org $1, every org
 * when null). $2 is the decision for a pending approval that has not expired
 * ('approved' | 'rejected'; the sweep passes 'expired'), $3 the clock's now,
 * $4 the decider key id, $5 its role, $6 the decision reason; by id, $7 the deciding request's correlation id (or null).
 *
 * The decider's reason is kept on the approval row only (free text stays off
 * the append-only ledger, as a reconcile's note does): the event records its
 * SHA-256 as stored (`reasonDigest`, lowercase hex; null when none was given,
 * and on an expiry, which stores none), and ledger verify finds the row's
 * reason rewritten (tool-call-check.ts, approvalMismatch). Events written
 * before it was recorded have no `reasonDigest` key and are not compared.
 *
 * The sweep locks the approvals it settles first, in id order, as a run's end
 * does (RunsService.endRun): an UPDATE locks rows in whatever order its plan
 * reads them, and two statements locking the same approvals in different
 * orders can deadlock.
 *
 * `batched` (the periodic sweep, ApprovedCallRunner) settles at most $7 of the
 * overdue approvals, the first to expire (locked in id order all the same), and
 * its caller sends it again until fewer come back: one statement over a large
 * backlog (replicas down for a while, a burst's expiry) could outlast the
 * statement timeout on every pass and never catch up. Each batch is a
 * statement, and a transaction, of its own, so none holds its locks while the
 * next runs; within each the lock order is still the id order.
 *
 * `ofRun` (a run read, RunsService.get): the batched expiry of one run's
 * overdue approvals, $1 being the run's id rather than an org's.
 *
 * `skipLocked` (a read that writes an expiry down: a run read, a listing, an
 * export, usage, events, a call's result, its replay): the overdue approvals
 * another session holds (a decision's transaction, the sweep's batch, a run's
 * end, a long transaction) are skipped, not waited for — a plain read waited
 * for them the whole statement timeout and answered 503, and so did the run
 * read that starts a run's complete/cancel. Reads show an approval past its
 * expiry expired all the same (README: from the moment it passes), and the
 * holder or the periodic sweep (which waits for its rows: it must settle them)
 * writes it down. With 'by-id' it settles the approval $1 only if it is past its
 * expiry, as an expiry: a decision waits for its row, it must decide.
 *
 * An approval of a run that has ended is never decided here: the run's end
 * rejects it (RunsService.endRun, a batch at a time for a large backlog), its
 * call blocked RUN_NOT_ACTIVE. The run is read FOR KEY SHARE as the approval is
 * decided — after the approval's lock, the order every settle and the end's
 * batches keep — so a decision that waited for a run ending finds it ended and
 * settles nothing, and an end waits for a decision already past that read (it
 * then blocks the approved call). An overdue approval is expired whatever its
 * run (the end's batches leave overdue ones alone): it expired before anyone
 * rejected it, and reads have shown it expired since.
 */
/** Overdue approvals settled per `batched` statement (the sweep's, and a read's: ToolCallsQueryService). */
export const EXPIRY_BATCH = 1_000;

/** The approval's run (`a`: the approval's table or alias) has not ended, its row read FOR KEY SHARE. */
const runLive = (a: string): string =>
  `EXISTS (SELECT 1 FROM agent_runs r WHERE r.id = ${a}.run_id AND r.status IN ('running', 'waiting_approval') FOR KEY SHARE)`;

export function settleApprovalsSql(target: 'by-id' | 'expired', opts: { batched?: boolean; ofRun?: boolean; skipLocked?: boolean } = {}): string {
  // A decision's event names the decider's request too ($7, by id only: actorOf); a sweep's has no decider.
  const decider =
    target === 'by-id'
      ? `jsonb_strip_nulls(jsonb_build_object('keyId', $4::uuid, 'role', $5::text, 'correlationId', $7::text))`
      : `jsonb_build_object('keyId', $4::uuid, 'role', $5::text)`;
  const scope = target === 'by-id' ? 'id = $1::uuid' : opts.ofRun ? 'run_id = $1::uuid' : '($1::uuid IS NULL OR org_id = $1::uuid)';
  const overdue = `status = 'pending' AND expires_at <= $3 AND ${scope}`;
  // A batch is the $7 first to expire (read off the index of pending expiries, not the whole backlog sorted by id on
  // every batch), then locked in id order; the conditions repeated, so one settled meanwhile is skipped.
  const lockDue = target === 'expired' || opts.skipLocked === true;
  const due = !lockDue
    ? ''
    : `due AS MATERIALIZED (
      SELECT id FROM approval_requests
       WHERE ${opts.batched ? `id IN (SELECT id FROM approval_requests WHERE ${overdue} ORDER BY expires_at, id LIMIT $7::int) AND ` : ''}${overdue}
       ORDER BY id FOR UPDATE${opts.skipLocked ? ' SKIP LOCKED' : ''}),`;
  const where = !lockDue
    ? `id = $1 AND status = 'pending' AND (expires_at <= $3 OR ${runLive('approval_requests')})`
    : `id IN (SELECT id FROM due) AND status = 'pending' AND expires_at <= $3`;
  return `
    WITH ${due}
    ap AS (
      UPDATE approval_requests SET
        status = CASE WHEN expires_at <= $3 THEN 'expired' ELSE $2 END,
        decided_by = CASE WHEN expires_at <= $3 THEN NULL ELSE $4::uuid END,
        decided_role = CASE WHEN expires_at <= $3 THEN NULL ELSE $5 END,
        decided_at = $3,
        decision_reason = CASE WHEN expires_at <= $3 THEN NULL ELSE $6 END
      WHERE ${where}
      RETURNING id, org_id, run_id, tool_call_id, kind, status, tool_name, action, action_digest, decision_reason),
    tc AS (
      UPDATE tool_calls t SET
        status = CASE ap.status WHEN 'approved' THEN 'approved' ELSE 'blocked' END,
        error_code = CASE ap.status WHEN 'approved' THEN NULL WHEN 'expired' THEN 'APPROVAL_EXPIRED'
                       ELSE CASE ap.kind WHEN 'expert' THEN 'EXPERT_REJECTED' ELSE 'CLIENT_REJECTED' END END,
        http_status = CASE ap.status WHEN 'approved' THEN 200 ELSE 403 END,
        finished_at = CASE ap.status WHEN 'approved' THEN NULL ELSE now() END,
        updated_at = now()
      FROM ap WHERE t.id = ap.tool_call_id AND t.status = 'waiting_approval'
      RETURNING t.id),
    ru AS (
      UPDATE agent_runs r SET
        pending_approval_count = greatest(r.pending_approval_count - d.n, 0),
        status = CASE WHEN r.pending_approval_count - d.n <= 0 AND r.status = 'waiting_approval' THEN 'running' ELSE r.status END,
        updated_at = now()
      FROM (SELECT run_id, count(*)::int AS n FROM ap GROUP BY run_id) d WHERE r.id = d.run_id),
    ti AS (DELETE FROM tool_call_inputs i USING ap WHERE i.tool_call_id = ap.tool_call_id AND ap.status <> 'approved'),
    ev AS (
      INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata)
      SELECT gen_random_uuid(), ap.org_id,
             CASE ap.status WHEN 'approved' THEN 'tool_call.approved' ELSE 'tool_call.blocked' END,
             ap.run_id, ap.tool_call_id,
             CASE WHEN ap.status = 'expired' THEN NULL ELSE ${decider} END,
             jsonb_build_object('toolName', ap.tool_name, 'action', ap.action, 'digest', ap.action_digest, 'approvalId', ap.id,
                                'kind', ap.kind, 'decision', ap.status,
                                'errorCode', CASE ap.status WHEN 'approved' THEN NULL WHEN 'expired' THEN 'APPROVAL_EXPIRED'
                                               ELSE CASE ap.kind WHEN 'expert' THEN 'EXPERT_REJECTED' ELSE 'CLIENT_REJECTED' END END,
                                'reason', CASE ap.status WHEN 'approved' THEN NULL WHEN 'expired' THEN 'approval_expired'
                                               ELSE ap.kind || '_rejected' END,
                                'reasonDigest', encode(sha256(convert_to(ap.decision_reason, 'UTF8')), 'hex'))
        FROM ap)
    SELECT ap.id, ap.tool_call_id, ap.status, ap.kind, ap.org_id, ap.tool_name, ap.action FROM ap`;
}

/** A row the settle statement returns: one approval it settled, as it settled it. */
export interface SettledApproval {
  id: string;
  tool_call_id: string;
  status: ApprovalStatus;
  kind: ApprovalKind;
  org_id: string;
  tool_name: string;
  action: string;
}
