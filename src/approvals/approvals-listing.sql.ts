import { KeysetQuery } from '../db/keyset-query.js';
import { sizedPageSql } from '../db/sized-page.js';
import { CREATED_ISO_SQL } from '../ledger/ledger-chain.js';
import { APPROVAL_COLUMNS, type ApprovalRecord } from './approval.view.js';

/** The filters of GET /v1/approvals once the key's scope and role are applied (an agent's kind is always client). */
export interface ApprovalListingFilters {
  /** null: every org (a platform key naming none) */
  orgId: string | null;
  status?: 'pending' | 'approved' | 'rejected' | 'expired';
  kind?: 'expert' | 'client';
  runId?: string;
}

export interface ApprovalListingRow extends ApprovalRecord {
  created_iso: string;
  /** bigint, as pg hands it over: how many rows the page held before the cut by size */
  page_rows: string;
  /** its redacted input, jsonb text bytes (what the page's budget counts, and its charge) */
  row_bytes: number;
}

/**
 * One newest-first page of approvals, `limit` rows at most and cut sooner once their redacted inputs pass
 * `budgetBytes` (an approval carries its call's, which an agent can make large and queue). Expiry as the view shows
 * it: a pending approval past its expiry at `now` is listed as expired, not pending.
 */
export function approvalsSizedPageSql(
  f: ApprovalListingFilters, after: { createdIso: string; key: string } | undefined, limit: number, now: Date, budgetBytes: number,
): { sql: string; params: unknown[] } {
  const query = new KeysetQuery();
  if (f.orgId !== null) query.where((x) => `org_id = ${x}::uuid`, f.orgId);
  if (f.status === 'pending') query.where((x) => `status = 'pending' AND expires_at > ${x}`, now);
  else if (f.status === 'expired') query.where((x) => `(status = 'expired' OR (status = 'pending' AND expires_at <= ${x}))`, now);
  else if (f.status) query.where((x) => `status = ${x}`, f.status);
  if (f.kind) query.where((x) => `kind = ${x}`, f.kind);
  if (f.runId) query.where((x) => `run_id = ${x}::uuid`, f.runId);
  const page = query.after(after, 'id', 'uuid').page('approval_requests', 'id', limit);
  query.params.push(budgetBytes);
  const sql = sizedPageSql(
    `SELECT ${APPROVAL_COLUMNS}, ${CREATED_ISO_SQL} AS created_iso ${page}`,
    'octet_length(input_redacted::text)',
    `$${query.params.length}`,
    'created_at DESC, id DESC',
  );
  return { sql, params: query.params };
}
