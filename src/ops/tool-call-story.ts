import { timeText } from '../common/time-text.js';
import { APPROVAL_COLUMNS, approvalView, type ApprovalRecord } from '../approvals/approval.view.js';
import type { DataSource } from 'typeorm';
import { shownEventJson, TOO_DEEP_ACTOR, TOO_DEEP_METADATA } from './ledger-events.sql.js';

/** One event of a call's story, in append order. */
export interface ToolCallEventView {
  id: string;
  type: string;
  actor: unknown;
  metadata: unknown;
  createdAt: string;
  /** null until the sealer has chained it (a fraction of a second) */
  chainSeq: number | null;
  hash: string | null;
}

export interface PolicyDecisionView {
  id: string;
  decision: string;
  riskLevel: string;
  ruleId: string | null;
  reason: string;
  actionDigest: string;
  createdAt: string;
}

export interface ApprovalView {
  id: string;
  toolCallId: string;
  runId: string;
  kind: string;
  status: string;
  toolName: string;
  action: string;
  inputRedacted: unknown;
  riskLevel: string;
  reason: string;
  actionDigest: string;
  createdAt: string;
  expiresAt: string;
  decidedBy: string | null;
  decidedAt: string | null;
  decisionReason: string | null;
  toolCallStatus: string | null;
  toolCallErrorCode: string | null;
}

/** What GET /v1/tool-calls/:id adds to the ToolCall: the whole story of one call. */
export interface ToolCallStory {
  events: ToolCallEventView[];
  policyDecision: PolicyDecisionView | null;
  approval: ApprovalView | null;
}


/**
 * Events, policy decision and approval of a call already known to belong to
 * `orgId`. The decision the call row points at wins over any other of the call.
 * The approval is shown as of `nowMs` (approvalView): expired once past its expiry. The API always passes the
 * clock's now; without it (the ledger bench, timing the reads), the approval as stored.
 */
export async function loadToolCallStory(
  ds: DataSource,
  orgId: string,
  toolCallId: string,
  policyDecisionId: string | null,
  nowMs?: number,
): Promise<ToolCallStory> {
  const [events, decisions, approvals] = (await Promise.all([
    ds.query(
      `SELECT id, type, actor, metadata, created_at, chain_seq, hash FROM runtime_ledger_events
        WHERE tool_call_id = $1::uuid AND org_id = $2::uuid ORDER BY seq`,
      [toolCallId, orgId],
    ),
    ds.query(
      `SELECT id, decision, risk_level, rule_id, reason, action_digest, created_at FROM policy_decisions
        WHERE tool_call_id = $1::uuid AND org_id = $2::uuid
        ORDER BY (id = $3::uuid) IS TRUE DESC, created_at DESC, id DESC LIMIT 1`,
      [toolCallId, orgId, policyDecisionId],
    ),
    ds.query(
      `SELECT ${APPROVAL_COLUMNS} FROM approval_requests WHERE tool_call_id = $1::uuid AND org_id = $2::uuid`,
      [toolCallId, orgId],
    ),
  ])) as [
    { id: string; type: string; actor: unknown; metadata: unknown; created_at: Date | number; chain_seq: string | null; hash: string | null }[],
    { id: string; decision: string; risk_level: string; rule_id: string | null; reason: string; action_digest: string; created_at: Date | number }[],
    ApprovalRecord[],
  ];
  const d = decisions[0];
  const a = approvals[0];
  return {
    events: events.map((e) => ({
      id: e.id,
      type: e.type,
      // Nested thousands deep (written around the gateway) an event is shown by a marker, as the listing shows it.
      actor: shownEventJson(e.actor, TOO_DEEP_ACTOR),
      metadata: shownEventJson(e.metadata, TOO_DEEP_METADATA),
      createdAt: timeText(e.created_at),
      chainSeq: e.chain_seq === null ? null : Number(e.chain_seq),
      hash: e.hash,
    })),
    policyDecision: d
      ? { id: d.id, decision: d.decision, riskLevel: d.risk_level, ruleId: d.rule_id, reason: d.reason, actionDigest: d.action_digest, createdAt: timeText(d.created_at) }
      : null,
    approval: a ? approvalView(a, nowMs) : null,
  };
}
