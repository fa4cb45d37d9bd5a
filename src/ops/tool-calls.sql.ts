import { KeysetQuery } from '../db/keyset-query.js';
import { sizedPageSql } from '../db/sized-page.js';
import { CREATED_ISO_SQL } from '../ledger/ledger-chain.js';
import { ToolCallEntity } from '../tool-calls/tool-call.entity.js';
import type { ToolCallStatus } from '../tool-calls/tool-call-status.js';
import type { CursorPosition } from './ledger-cursor.js';

/** The list/export filters after validation; timestamps are exact PostgreSQL text (see parseQueryTimestamp). */
export interface ToolCallFilters {
  runId?: string;
  status?: ToolCallStatus;
  toolName?: string;
  action?: string;
  errorCode?: string;
  correlationId?: string;
  since?: string;
  until?: string;
}

export interface ToolCallRow {
  id: string;
  org_id: string;
  run_id: string;
  specialist_id: string;
  tool_name: string;
  action: string;
  status: ToolCallStatus;
  error_code: string | null;
  error_text: string | null;
  correlation_id: string;
  idempotency_key: string;
  action_digest: string;
  input_redacted: unknown;
  output_redacted: unknown;
  risk_level: string | null;
  policy_decision_id: string | null;
  retry_count: number;
  duration_ms: number | null;
  cost_cents: number;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  note: string | null;
  /** created_at as exact text (microseconds): what a cursor carries */
  created_iso: string;
}

/**
 * Only the columns of the ops view: redacted input and output, never the
 * encrypted result or anything else, so no listing or export can leak more.
 */
export const TOOL_CALL_COLUMNS = `id, org_id, run_id, specialist_id, tool_name, action, status, error_code, error_text, correlation_id,
  idempotency_key, action_digest, input_redacted, output_redacted, risk_level, policy_decision_id, retry_count, duration_ms,
  cost_cents, created_at, started_at, finished_at, note, ${CREATED_ISO_SQL} AS created_iso`;

/**
 * One page of tool calls, newest first by (created_at DESC, id DESC), starting
 * strictly after `after`. Every value is a parameter. The plain column
 * comparisons (no functions on columns) let the planner use the composite
 * indexes of migration 1764600000000 for both the filter and the order, so a
 * deep page costs the same as the first.
 */
export function toolCallsPageSql(orgId: string | null, f: ToolCallFilters, after: CursorPosition | undefined, limit: number): { sql: string; params: unknown[] } {
  const q = new KeysetQuery();
  if (orgId !== null) q.where((p) => `org_id = ${p}::uuid`, orgId);
  if (f.runId !== undefined) q.where((p) => `run_id = ${p}::uuid`, f.runId);
  if (f.status !== undefined) q.where((p) => `status = ${p}`, f.status);
  if (f.toolName !== undefined) q.where((p) => `tool_name = ${p}`, f.toolName);
  if (f.action !== undefined) q.where((p) => `action = ${p}`, f.action);
  if (f.errorCode !== undefined) q.where((p) => `error_code = ${p}`, f.errorCode);
  if (f.correlationId !== undefined) q.where((p) => `correlation_id = ${p}`, f.correlationId);
  if (f.since !== undefined) q.where((p) => `created_at >= ${p}::timestamptz`, f.since);
  if (f.until !== undefined) q.where((p) => `created_at < ${p}::timestamptz`, f.until);
  const sql = `SELECT ${TOOL_CALL_COLUMNS} ${q.after(after, 'id', 'uuid').page('tool_calls', 'id', limit)}`;
  const params = q.params;
  return { sql, params };
}

/**
 * Redacted input and output a list page holds at most (the tool-call and approval listings): it ends early, with a
 * nextCursor, past this. With outputs capped at 64 KiB a page of 200 tool calls is ~13 MB of outputs at most, an
 * acceptable body; this also bounds large inputs (an approval carries its call's, up to the redactor's ~256 K
 * characters) and rows written before the cap.
 */
export const LIST_PAGE_BYTES = 16 * 1024 * 1024;

/**
 * toolCallsPageSql's page cut short where the rows before a row already hold `budgetBytes` of redacted input and
 * output (their jsonb text, as PostgreSQL prints it: about their JSON size), so a page of large rows never becomes
 * one huge list body or export batch in memory. The first row always comes. `row_bytes` is a row's own size,
 * `page_rows` how many rows the page held before the cut: fewer returned than that, or a full page, means there may be more after the last one.
 */
export function toolCallsSizedPageSql(
  orgId: string | null, f: ToolCallFilters, after: CursorPosition | undefined, limit: number, budgetBytes: number,
): { sql: string; params: unknown[] } {
  const { sql: page, params } = toolCallsPageSql(orgId, f, after, limit);
  params.push(budgetBytes);
  const sql = sizedPageSql(page, 'octet_length(input_redacted::text) + coalesce(octet_length(output_redacted::text), 0)', `$${params.length}`, 'created_at DESC, id DESC');
  return { sql, params };
}

/** A row of toolCallsSizedPageSql. */
export interface SizedToolCallRow extends ToolCallRow {
  /** bigint, as pg hands it over */
  page_rows: string;
  /** its redacted input and output, jsonb text bytes (what the page's budget counts; a list page's charge) */
  row_bytes: number;
}

/** One call by id (the detail view); `orgId` null = any org (platform keys). */
export function toolCallByIdSql(orgId: string | null, id: string): { sql: string; params: unknown[] } {
  return orgId === null
    ? { sql: `SELECT ${TOOL_CALL_COLUMNS} FROM tool_calls WHERE id = $1::uuid`, params: [id] }
    : { sql: `SELECT ${TOOL_CALL_COLUMNS} FROM tool_calls WHERE id = $1::uuid AND org_id = $2::uuid`, params: [id, orgId] };
}

/** The row as the entity toToolCallView reads. */
export function toolCallEntityOf(r: ToolCallRow): ToolCallEntity {
  return Object.assign(new ToolCallEntity(), {
    id: r.id,
    orgId: r.org_id,
    runId: r.run_id,
    specialistId: r.specialist_id,
    toolName: r.tool_name,
    action: r.action,
    status: r.status,
    errorCode: r.error_code,
    errorText: r.error_text,
    correlationId: r.correlation_id,
    idempotencyKey: r.idempotency_key,
    actionDigest: r.action_digest,
    inputRedacted: r.input_redacted,
    outputRedacted: r.output_redacted,
    riskLevel: r.risk_level,
    policyDecisionId: r.policy_decision_id,
    retryCount: r.retry_count,
    durationMs: r.duration_ms,
    costCents: r.cost_cents,
    createdAt: r.created_at,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    note: r.note,
  });
}
