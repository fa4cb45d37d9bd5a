import { NIL_UUID } from '../common/ids.js';
import { APPROVAL_ROW_AGREES_SQL } from '../approvals/approval-binding.js';
import type { ToolCallStatus } from '../tool-calls/tool-call-status.js';
import { FIRST_IN_CHAIN_ORDER, isoSql } from './ledger-chain.js';
import { firstEventWithoutRow } from './row-less-events.js';
import type { ChainReader, VerifyBreak } from './ledger-verifier.service.js';

const PAGE = 5_000;

/**
 * Tool calls against their events, for chain verification. Ops views, exports,
 * usage and replays read the tool_calls row, which is not chained: an UPDATE of
 * it (failed → succeeded) or a DELETE, plain SQL within the app role's rights,
 * left every chain intact and verify ok. The first call (oldest first) whose row
 * disagrees with its events, or whose events have no row, is a break.
 */
export async function firstCallOffLedger(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  return (await firstCallOffEvents(db, orgId)) ?? (await firstEventWithoutRow(db, orgId, { type: 'tool_call.requested', idColumn: 'tool_call_id', table: 'tool_calls', what: 'tool call' }));
}

/** The statuses a call ends in, each recorded by an event of the same name (or a reconcile). */
const SETTLED: ReadonlySet<string> = new Set<ToolCallStatus>(['blocked', 'succeeded', 'failed', 'indeterminate']);

/**
 * The step each event of a call records: the statuses it may follow (null: it opens the trail) and
 * the status it leads to (null: the status stays; a reconcile's is its metadata's `to`). Taken from
 * every writer of a call's events — ToolCallsService.submit (requested with blocked, failed,
 * approval_requested or started, in the intent's statement) and recordOutcome (retried, then the
 * outcome, in one statement), approval-settle.sql.ts (approved, or blocked on a rejection or expiry),
 * approved-call-claim.sql.ts (started, or blocked by the flag or policy), RunsService.endRun
 * (blocked), OrphanSweeperService (indeterminate), ReconcileService (reconciled) and
 * ToolCallLedger.writeOutcome (outcome_after_sweep) — each conditional on the row's status in the
 * same statement. A trail off this table is the gateway acting on a row edited around it: a call
 * set to `approved` with SQL is started by the approvals sweep with no approval on the ledger.
 */
interface Step {
  after: readonly (ToolCallStatus | null)[];
  to: ToolCallStatus | null;
  /** Also once reconciled: the vendor's answer to a swept call may arrive after ops settled it. */
  afterReconcile?: true;
}
const STEPS: Readonly<Record<string, Step>> = {
  'tool_call.requested': { after: [null], to: 'requested' },
  'tool_call.approval_requested': { after: ['requested'], to: 'waiting_approval' },
  'tool_call.approved': { after: ['waiting_approval'], to: 'approved' },
  'tool_call.started': { after: ['requested', 'approved'], to: 'running' },
  'tool_call.blocked': { after: ['requested', 'waiting_approval', 'approved'], to: 'blocked' },
  'tool_call.failed': { after: ['requested', 'running'], to: 'failed' },
  'tool_call.succeeded': { after: ['running'], to: 'succeeded' },
  'tool_call.indeterminate': { after: ['running'], to: 'indeterminate' },
  'tool_call.reconciled': { after: ['indeterminate'], to: null },
  'tool_call.retried': { after: ['running'], to: null },
  'tool_call.outcome_after_sweep': { after: ['indeterminate'], to: null, afterReconcile: true },
};
const RECONCILED_TO: ReadonlySet<string> = new Set<ToolCallStatus>(['succeeded', 'failed']);

/** One event of a call, as the check reads it. */
interface CallEvent {
  id: string;
  chainSeq: number | null;
  type: string;
  to: string | null;
  errorCode: string | null;
  /** A reconcile written before its event recorded an error code (before 2b2c169): it kept a failed call's code. */
  legacy: boolean;
  noteDigest: string | null;
  /** The first of the row's run, tool name, action and action digest this event disagrees on; null when none. */
  differs: string | null;
  /** What an approval or policy step recorded (null where the event has no such field). */
  kind: string | null;
  ruleId: string | null;
  hasRuleId: boolean;
  riskLevel: string | null;
  reason: string | null;
  approvalId: string | null;
  decision: string | null;
  actorKeyId: string | null;
  actorRole: string | null;
  /** A decision's SHA-256 of the decider's reason (null: none given); hasReasonDigest false on events from before it was recorded. */
  reasonDigest: string | null;
  hasReasonDigest: boolean;
  /** The metadata of an event that records an outcome (FACT_TYPES: durations, statuses, cost, the output's digest); else null. */
  facts: Record<string, unknown> | null;
  /** Milliseconds from the row's created_at to this event's (the requested event's is written in the row's statement). */
  lagMs: number;
}

/** The call's approval row, as the detail view shows it. */
interface ApprovalRow {
  id: string; kind: string; status: string; riskLevel: string; decidedBy: string | null; decidedRole: string | null;
  /** The SHA-256 (hex) of its decision_reason, null when it has none. */
  reasonDigest: string | null;
  /** Whether it shows the call row's tool name, action, redacted input and action digest (what its reviewer saw is what runs). */
  agrees: boolean;
}

/** The call's policy decision row the detail view shows (its policy_decision_id's, else its latest). */
interface DecisionRow {
  decision: string; ruleId: string | null; riskLevel: string; digest: string;
}

interface CallRow {
  id: string; status: string; error_code: string | null; note_digest: string | null; created_iso: string; action_digest: string;
  vendor_status: number | null; duration_ms: number | null; retry_count: number; cost_cents: number;
  /** The SHA-256 (hex) of output_redacted's jsonb text; null when it has none. */
  output_digest: string | null;
  events: CallEvent[] | null;
  approval: ApprovalRow | null;
  decision: DecisionRow | null;
}

/**
 * The org's first call whose row disagrees with its events, all read with it: its trail must follow
 * STEPS from a tool_call.requested; its status must be the one the trail leads to, and its error
 * code the one the event that led there recorded (and a reconciled call's note the digest its event
 * recorded, when it has one: events from before it was recorded do not); every event must name the
 * row's run, tool, action and action digest; its approval and policy decision rows, which the detail
 * view shows, must be the ones its events recorded (approvalMismatch, decisionMismatch; the decider's reason
 * by its digest, when the event has one). Row and events are read in one statement, as the
 * gateway writes a call's status and its events in one: a call moving meanwhile is never half seen.
 * (A forged event INSERTed to match an edit still passes: inserting is what an append-only ledger
 * allows; see README "What verify cannot see".)
 */
async function firstCallOffEvents(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  for (let after = { iso: '-infinity', id: NIL_UUID }; ;) {
    const rows = (await db.query(
      `SELECT t.id, t.status, t.error_code, t.action_digest, ${isoSql('t.created_at')} AS created_iso,
              encode(sha256(convert_to(t.note, 'UTF8')), 'hex') AS note_digest, e.events,
              t.vendor_status, t.duration_ms, t.retry_count, t.cost_cents,
              encode(sha256(convert_to(t.output_redacted::text, 'UTF8')), 'hex') AS output_digest,
              (SELECT jsonb_build_object('id', a.id, 'kind', a.kind, 'status', a.status, 'riskLevel', a.risk_level,
                                         'decidedBy', a.decided_by, 'decidedRole', a.decided_role,
                                         'reasonDigest', encode(sha256(convert_to(a.decision_reason, 'UTF8')), 'hex'),
                                         'agrees', ${APPROVAL_ROW_AGREES_SQL})
                 FROM approval_requests a WHERE a.tool_call_id = t.id AND a.org_id = t.org_id) AS approval,
              (SELECT jsonb_build_object('decision', d.decision, 'ruleId', d.rule_id, 'riskLevel', d.risk_level, 'digest', d.action_digest)
                 FROM policy_decisions d WHERE d.tool_call_id = t.id AND d.org_id = t.org_id
                ORDER BY (d.id = t.policy_decision_id) IS TRUE DESC, d.created_at DESC, d.id DESC LIMIT 1) AS decision
         FROM tool_calls t
         LEFT JOIN LATERAL (
           SELECT jsonb_agg(jsonb_build_object(
                    'id', e.id, 'chainSeq', e.chain_seq, 'type', e.type, 'to', e.metadata->>'to',
                    'errorCode', e.metadata->>'errorCode', 'noteDigest', e.metadata->>'noteDigest',
                    'legacy', e.type = 'tool_call.reconciled' AND e.metadata->'errorCode' IS NULL,
                    'differs', CASE WHEN e.run_id IS DISTINCT FROM t.run_id THEN 'run'
                                    WHEN e.metadata->>'toolName' IS DISTINCT FROM t.tool_name THEN 'tool name'
                                    WHEN e.metadata->>'action' IS DISTINCT FROM t.action THEN 'action'
                                    WHEN e.metadata->>'digest' IS DISTINCT FROM t.action_digest THEN 'action digest'
                                    -- Recorded since this release: an earlier one's requested event has no inputDigest.
                                    WHEN e.type = 'tool_call.requested' AND e.metadata ? 'inputDigest'
                                     AND e.metadata->>'inputDigest' IS DISTINCT FROM encode(sha256(convert_to(t.input_redacted::text, 'UTF8')), 'hex') THEN 'input' END,
                    'kind', e.metadata->>'kind', 'ruleId', e.metadata->>'ruleId', 'hasRuleId', e.metadata ? 'ruleId',
                    'riskLevel', e.metadata->>'riskLevel', 'reason', e.metadata->>'reason',
                    'approvalId', e.metadata->>'approvalId', 'decision', e.metadata->>'decision',
                    'actorKeyId', e.actor->>'keyId', 'actorRole', e.actor->>'role',
                    'reasonDigest', e.metadata->>'reasonDigest', 'hasReasonDigest', e.metadata ? 'reasonDigest',
                    'facts', CASE WHEN e.type IN (${FACT_TYPES_SQL}) THEN e.metadata END,
                    'lagMs', extract(epoch FROM e.created_at - t.created_at) * 1000)
                  ORDER BY ${FIRST_IN_CHAIN_ORDER('e')}) AS events
             FROM runtime_ledger_events e WHERE e.tool_call_id = t.id AND e.org_id = t.org_id) e ON true
        WHERE t.org_id = $1 AND (t.created_at, t.id) > ($2::timestamptz, $3::uuid)
        ORDER BY t.created_at, t.id LIMIT ${PAGE}`,
      [orgId, after.iso, after.id],
    )) as CallRow[];
    for (const r of rows) {
      const off = callMismatch(r);
      if (off) return { chainSeq: Number(off.at?.chainSeq ?? 0), eventId: off.at?.id ?? null, reason: off.reason };
    }
    if (rows.length < PAGE) return null;
    const last = rows[rows.length - 1];
    after = { iso: last.created_iso, id: last.id };
  }
}

interface Mismatch {
  at: CallEvent | null;
  reason: string;
}

/** Why a call row disagrees with its events, or null. Ids and known values only in the reason: an edited row may hold anything. */
function callMismatch(r: CallRow): Mismatch | null {
  const events = r.events ?? [];
  const settled = SETTLED.has(r.status); // status itself is one of the CHECK constraint's
  if (events.length === 0) {
    return { at: null, reason: settled ? `tool call ${r.id} is ${r.status}, but no event in the ledger settled it` : `tool call ${r.id} has no tool_call.requested event in the ledger` };
  }
  const trail = walk(r.id, events);
  if ('reason' in trail) return trail;
  const { status, by, errorCode } = trail;
  const settling = SETTLED.has(status);
  if (status !== r.status) {
    if (settled && !settling) return { at: null, reason: `tool call ${r.id} is ${r.status}, but no event in the ledger settled it` };
    return { at: by, reason: settling ? `tool call ${r.id} is ${r.status}, but its last settling event says ${status}` : `tool call ${r.id} is ${r.status}, but its last event (${by.type}) says ${status}` };
  }
  if (r.error_code !== errorCode) return { at: by, reason: `tool call ${r.id}: its error code differs from its last ${settling ? 'settling ' : ''}event's` };
  const differs = events.findLast((e) => e.differs !== null);
  if (differs) return { at: differs, reason: `tool call ${r.id}: its ${differs.differs} differs from its events'` };
  const recorded = approvalMismatch(r, events) ?? decisionMismatch(r, events) ?? outcomeFactsMismatch(r, events);
  if (recorded) return recorded;
  // A note is what tells the agent an operator checked with the vendor (tool-call-body.ts): only a reconcile writes one.
  if (by.type !== 'tool_call.reconciled') return r.note_digest === null ? null : { at: by, reason: `tool call ${r.id} has a reconcile note, but no reconcile on the ledger` };
  if (by.noteDigest !== null && r.note_digest !== by.noteDigest) return { at: by, reason: `tool call ${r.id}: its reconcile note differs from the one its event recorded` };
  return null;
}

/**
 * The call's approval row against its events. The detail view shows the row (who decided, what), the chain
 * recorded the request (kind, risk) and the decision (approvalId, decision, the deciding key; no key for an
 * expiry; the SHA-256 of the decider's reason, `reasonDigest`, null when none, as the reconcile's noteDigest):
 * approval-settle.sql.ts, or RunsService.endRun, which rejects the pending approvals of the run it ends (its event
 * names the approval but no decision; the end's reason it stores as the decision reason has its reasonDigest, except
 * on ends from before it was recorded). A row still pending whose call moved on was never decided.
 */
function approvalMismatch(r: CallRow, events: CallEvent[]): Mismatch | null {
  const requested = events.find((e) => e.type === 'tool_call.approval_requested');
  const a = r.approval;
  if (!requested) return a ? { at: null, reason: `tool call ${r.id} has an approval request, but none on the ledger` } : null;
  if (!a) return { at: requested, reason: `tool call ${r.id}: its approval request on the ledger has no approval row` };
  // Written with the call row in one statement (tool-call-intent.ts) and never updated: what the reviewer is shown.
  if (!a.agrees) return { at: requested, reason: `tool call ${r.id}: its approval row shows another tool, action, input or action digest than the call's` };
  if ((requested.kind !== null && a.kind !== requested.kind) || (requested.riskLevel !== null && a.riskLevel !== requested.riskLevel)) {
    return { at: requested, reason: `tool call ${r.id}: its approval row differs from the request its event recorded` };
  }
  const decided = events.find((e) => e.approvalId !== null);
  if (!decided) {
    // Events from before the decision named its approval (7aa7600) leave a decided row unchecked; a pending one must still be waiting.
    if (a.status === 'pending' && a.decidedBy === null && r.status === 'waiting_approval') return null;
    if (a.status !== 'pending' && r.status !== 'waiting_approval') return null;
    return { at: requested, reason: a.status === 'pending' ? `tool call ${r.id} is ${r.status}, but its approval is still pending` : `tool call ${r.id}: its approval is decided, but no decision is on the ledger` };
  }
  const status = decided.decision ?? 'rejected';
  if (decided.approvalId !== a.id || a.status !== status || a.decidedBy !== decided.actorKeyId || a.decidedRole !== decided.actorRole) {
    return { at: decided, reason: `tool call ${r.id}: its approval row differs from the decision its event recorded` };
  }
  // The reason, when the event recorded its digest: not on decisions (nor run ends' rejections) from before it was.
  if (decided.hasReasonDigest && a.reasonDigest !== decided.reasonDigest) {
    return { at: decided, reason: `tool call ${r.id}: its approval's decision reason differs from the one its event recorded` };
  }
  return null;
}

/**
 * The policy decision the detail view shows against the events that recorded it: a block by policy (its rule),
 * an approval request (its rule, risk and kind), or a call started straight from its request (allowed or observed).
 * The row's digest is the call's. Calls blocked before the policy step (flag, manifest) or failed on their input
 * are not checked beyond the digest: no event records a decision for them.
 */
function decisionMismatch(r: CallRow, events: CallEvent[]): Mismatch | null {
  const d = r.decision;
  const ruled = events.findLast((e) => (e.type === 'tool_call.blocked' && e.reason === 'policy') || e.type === 'tool_call.approval_requested');
  // A block by policy and an approval request are written with their decision row, in one statement (the intent's, or the
  // claim's for a block after approval): a decision on the ledger with no row is a row deleted around the gateway.
  if (!d) return ruled ? { at: ruled, reason: `tool call ${r.id}: its policy decision on the ledger has no decision row` } : null;
  const off = (at: CallEvent | null): Mismatch => ({ at, reason: `tool call ${r.id}: its policy decision differs from the one its events recorded` });
  if (d.digest !== r.action_digest) return off(null);
  if (ruled?.type === 'tool_call.blocked') return d.decision === 'block' && (!ruled.hasRuleId || d.ruleId === ruled.ruleId) ? null : off(ruled);
  if (ruled) {
    const expected = ruled.kind === null ? null : `require_${ruled.kind}_approval`;
    const same = (expected === null || d.decision === expected) && (!ruled.hasRuleId || d.ruleId === ruled.ruleId) && (ruled.riskLevel === null || d.riskLevel === ruled.riskLevel);
    return same ? null : off(ruled);
  }
  const started = events[1]?.type === 'tool_call.started' ? events[1] : null;
  if (started && d.decision !== 'allow' && d.decision !== 'observe') return off(started);
  return null;
}

/** The events whose metadata records what the row holds beside its status (outcomeFactsMismatch). */
const FACT_TYPES = ['tool_call.succeeded', 'tool_call.failed', 'tool_call.indeterminate', 'tool_call.outcome_after_sweep'] as const;
const FACT_TYPES_SQL = FACT_TYPES.map((t) => `'${t}'`).join(', ');

/**
 * How far a call's tool_call.requested event may be written after its row's created_at: both are written by the
 * intent's one statement (the row at its transaction's now(), the event at clock_timestamp()), so by at most a
 * statement's time; this bound is far above any statement timeout.
 */
export const REQUESTED_LAG_MAX_MS = 15 * 60_000;

/**
 * The row's other recorded facts against the events that recorded them: its creation time against its
 * tool_call.requested event's (usage windows and exports go by it); the vendor status, duration, retries, cost and
 * output (by the SHA-256 of its jsonb text) against the outcome event that wrote them (OutcomeRecorder, its
 * `durationMs` marks it); the cost against the orphan sweep's charge, taken back by an outcome_after_sweep that
 * found nothing sent. A call with no outcome event holds none of them. A fact the event does not carry (events
 * written before it was recorded: cost and output digest) is not checked.
 */
function outcomeFactsMismatch(r: CallRow, events: CallEvent[]): Mismatch | null {
  const requested = events[0];
  if (!(requested.lagMs >= 0 && requested.lagMs <= REQUESTED_LAG_MAX_MS)) {
    return { at: requested, reason: `tool call ${r.id}: its creation time differs from its tool_call.requested event's` };
  }
  const off = (at: CallEvent | null, what: string): Mismatch => ({ at, reason: `tool call ${r.id}: its ${what} differs from the one its events recorded` });
  const settler = events.findLast((e) => e.facts !== null && e.type !== 'tool_call.outcome_after_sweep') ?? null;
  const f = settler?.facts ?? {};
  const has = (key: string): boolean => Object.hasOwn(f, key);
  const fact = (key: string): unknown => (has(key) ? (f[key] ?? null) : null);
  // Only the outcome recorder's event carries a duration; the sweep's, an input refusal's and a block's record no vendor facts.
  const byRecorder = has('durationMs');
  if (r.duration_ms !== fact('durationMs')) return off(settler, 'duration');
  const recorded = (key: string, value: unknown, none: unknown): boolean => (byRecorder ? !has(key) || value === fact(key) : value === none);
  if (!recorded('vendorStatus', r.vendor_status, null)) return off(settler, 'vendor status');
  if (!recorded('retryCount', r.retry_count, 0)) return off(settler, 'retry count');
  if (!recorded('outputDigest', r.output_digest, null)) return off(settler, 'output');
  // The cost: the recorder's or the sweep's charge (0 for what settles with no vendor call); a late answer that found
  // nothing sent took the sweep's back, unless ops had reconciled the call first. Unknown on events from before it was recorded.
  const late = events.filter((e) => e.type === 'tool_call.outcome_after_sweep');
  if (late.some((e) => !Object.hasOwn(e.facts ?? {}, 'costCents'))) return null;
  const uncharged = late.some((e) => e.facts?.costCents === 0 && e.facts?.reconciled === false);
  const charged = has('costCents') ? fact('costCents') : settler === null || (!byRecorder && f.reason !== 'orphaned') ? 0 : undefined;
  if (charged === undefined) return null;
  if (r.cost_cents !== (uncharged ? 0 : charged)) return off(uncharged ? late[late.length - 1] : settler, 'cost');
  return null;
}

/**
 * The status a call's events lead to, the event that led there and the error code the row must hold, or
 * where they leave STEPS. The code is the leading event's, but for a reconcile recorded before its event
 * carried one: that reconcile cleared a succeeded call's code and kept a failed call's as it was.
 */
function walk(id: string, events: CallEvent[]): { status: ToolCallStatus; by: CallEvent; errorCode: string | null } | Mismatch {
  let status: ToolCallStatus | null = null;
  let by = events[0];
  let errorCode: string | null = null;
  let reconciled = false;
  for (const e of events) {
    const step = Object.hasOwn(STEPS, e.type) ? STEPS[e.type] : undefined;
    // The type is not quoted: an event of another type was inserted around the gateway, and may hold anything.
    if (!step) return { at: e, reason: `tool call ${id}: one of its events is of a type the gateway never writes for a call` };
    if (!step.after.includes(status) && !(step.afterReconcile && reconciled)) return { at: e, reason: offTrail(id, status, e.type) };
    if (e.type === 'tool_call.reconciled') {
      if (e.to === null || !RECONCILED_TO.has(e.to)) return { at: e, reason: `tool call ${id}: its reconcile event names no outcome` };
      reconciled = true;
    }
    const to = e.type === 'tool_call.reconciled' ? (e.to as ToolCallStatus) : step.to;
    if (to !== null) {
      [status, by] = [to, e];
      errorCode = e.legacy ? (to === 'succeeded' ? null : errorCode) : e.errorCode;
    }
  }
  return { status: status!, by, errorCode };
}

function offTrail(id: string, status: ToolCallStatus | null, type: string): string {
  if (status === null) return `tool call ${id}: its first event is ${type}, not tool_call.requested`;
  if (status === 'waiting_approval' && type === 'tool_call.started') return `tool call ${id} started after an approval request, with no approval on the ledger`;
  return `tool call ${id}: ${type} follows ${status}, a step the gateway never writes`;
}
