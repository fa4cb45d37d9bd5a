import type { ToolCallEntity } from './tool-call.entity.js';
import { clientIdempotencyKey } from './tool-use.js';

/** A ToolCall as ops see it (API.md §6): redacted input/output only. */
export interface ToolCallView {
  id: string;
  orgId: string;
  runId: string;
  specialistId: string;
  toolName: string;
  action: string;
  status: string;
  errorCode: string | null;
  errorText: string | null;
  correlationId: string;
  /** the Idempotency-Key the client sent, or the tool_use id for the default key (scoped to the run) */
  idempotencyKey: string;
  actionDigest: string;
  inputRedacted: unknown;
  outputRedacted: unknown;
  riskLevel: string | null;
  policyDecisionId: string | null;
  retryCount: number;
  durationMs: number | null;
  costCents: number;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  /** the operator's note of an ops reconcile (why the call was settled so); null for every other call */
  note: string | null;
}

/** The field names, in order: the CSV export's header row. */
export const TOOL_CALL_VIEW_FIELDS: readonly (keyof ToolCallView)[] = [
  'id', 'orgId', 'runId', 'specialistId', 'toolName', 'action', 'status', 'errorCode', 'errorText', 'correlationId',
  'idempotencyKey', 'actionDigest', 'inputRedacted', 'outputRedacted', 'riskLevel', 'policyDecisionId', 'retryCount',
  'durationMs', 'costCents', 'createdAt', 'startedAt', 'finishedAt', 'note',
];

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

export function toToolCallView(t: ToolCallEntity): ToolCallView {
  return {
    id: t.id,
    orgId: t.orgId,
    runId: t.runId,
    specialistId: t.specialistId,
    toolName: t.toolName,
    action: t.action,
    status: t.status,
    errorCode: t.errorCode,
    errorText: t.errorText,
    correlationId: t.correlationId,
    idempotencyKey: clientIdempotencyKey(t.idempotencyKey),
    actionDigest: t.actionDigest,
    inputRedacted: t.inputRedacted,
    outputRedacted: t.outputRedacted,
    riskLevel: t.riskLevel,
    policyDecisionId: t.policyDecisionId,
    retryCount: t.retryCount,
    durationMs: t.durationMs,
    costCents: t.costCents,
    createdAt: t.createdAt.toISOString(),
    startedAt: iso(t.startedAt),
    finishedAt: iso(t.finishedAt),
    note: t.note ?? null,
  };
}
