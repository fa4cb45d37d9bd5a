import { MAX_CANONICAL_DEPTH, nestedDeeperThan } from '../common/canonical-json.js';
import { timeText } from '../common/time-text.js';
import { KeysetQuery } from '../db/keyset-query.js';
import { sizedPageSql } from '../db/sized-page.js';
import { CREATED_ISO_SQL } from '../ledger/ledger-chain.js';
import type { CursorPosition } from './ledger-cursor.js';

export interface LedgerEventFilters {
  runId?: string;
  type?: string;
  since?: string;
  until?: string;
}

export interface LedgerEventRow {
  seq: string;
  id: string;
  org_id: string;
  type: string;
  run_id: string | null;
  tool_call_id: string | null;
  actor: unknown;
  metadata: unknown;
  created_at: Date | number;
  chain_seq: string | null;
  prev_hash: string | null;
  hash: string | null;
  created_iso: string;
}

export interface LedgerEventView {
  id: string;
  orgId: string;
  type: string;
  runId: string | null;
  toolCallId: string | null;
  actor: unknown;
  metadata: unknown;
  createdAt: string;
  /**
   * created_at as the event's hash covers it (CREATED_ISO_SQL: UTC, microseconds), so the chain can be recomputed from the
   * listing; `infinity` / `-infinity` for an event from before migration 1765200000000 holding one (timeText)
   */
  createdAtExact: string;
  chainSeq: number | null;
  prevHash: string | null;
  hash: string | null;
}

/** One page of events, newest first by (created_at DESC, seq DESC), strictly after `after`. */
export function ledgerEventsPageSql(orgId: string | null, f: LedgerEventFilters, after: CursorPosition | undefined, limit: number): { sql: string; params: unknown[] } {
  const q = new KeysetQuery();
  if (orgId !== null) q.where((p) => `org_id = ${p}::uuid`, orgId);
  if (f.runId !== undefined) q.where((p) => `run_id = ${p}::uuid`, f.runId);
  if (f.type !== undefined) q.where((p) => `type = ${p}`, f.type);
  if (f.since !== undefined) q.where((p) => `created_at >= ${p}::timestamptz`, f.since);
  if (f.until !== undefined) q.where((p) => `created_at < ${p}::timestamptz`, f.until);
  const sql = `SELECT seq, id, org_id, type, run_id, tool_call_id, actor, metadata, created_at, chain_seq, prev_hash, hash,
      coalesce(${CREATED_ISO_SQL}, created_at::text) AS created_iso
    ${q.after(after, 'seq', 'bigint').page('runtime_ledger_events', 'seq', limit)}`;
  const params = q.params;
  return { sql, params };
}

/**
 * What a listing shows for an event's metadata nested deeper than MAX_CANONICAL_DEPTH levels of arrays and objects.
 * Only a write around the gateway makes one (what the gateway writes comes from bodies of at most 32 levels); it has
 * no canonical form, so the sealer stops its org's chain at it, or verify breaks there when a sealed event was
 * rewritten so (either way verify names it). Shown as it is, some
 * thousands of levels down (jsonb takes them), JSON.stringify ran out of stack and the whole page was a 500, every
 * other event of the org unlistable behind it. Its other fields are shown; the content is in the database.
 */
export const TOO_DEEP_METADATA = Object.freeze({ nestedTooDeep: true, maxDepth: MAX_CANONICAL_DEPTH });
/** The same for an actor, with the fields an actor always has (keyId, role) null. */
export const TOO_DEEP_ACTOR = Object.freeze({ keyId: null, role: null, nestedTooDeep: true, maxDepth: MAX_CANONICAL_DEPTH });

/** `value`, or `marker` when it nests deeper than MAX_CANONICAL_DEPTH (see TOO_DEEP_METADATA): for any view of an event's JSON. */
export const shownEventJson = (value: unknown, marker: object): unknown => (nestedDeeperThan(value, MAX_CANONICAL_DEPTH) ? marker : value);

export function ledgerEventView(r: LedgerEventRow): LedgerEventView {
  return {
    id: r.id,
    orgId: r.org_id,
    type: r.type,
    runId: r.run_id,
    toolCallId: r.tool_call_id,
    actor: shownEventJson(r.actor, TOO_DEEP_ACTOR),
    metadata: shownEventJson(r.metadata, TOO_DEEP_METADATA),
    createdAt: timeText(r.created_at),
    createdAtExact: r.created_iso,
    chainSeq: r.chain_seq === null ? null : Number(r.chain_seq),
    prevHash: r.prev_hash,
    hash: r.hash,
  };
}

/**
 * ledgerEventsPageSql's page cut short where the rows before a row already hold `budgetBytes` of metadata and actor
 * (their jsonb text), as a tool-call page is (toolCallsSizedPageSql): `row_bytes` and `page_rows` come with each row.
 */
export function ledgerEventsSizedPageSql(
  orgId: string | null, f: LedgerEventFilters, after: CursorPosition | undefined, limit: number, budgetBytes: number,
): { sql: string; params: unknown[] } {
  const { sql: page, params } = ledgerEventsPageSql(orgId, f, after, limit);
  params.push(budgetBytes);
  const sql = sizedPageSql(page, 'octet_length(metadata::text) + coalesce(octet_length(actor::text), 0)', `$${params.length}`, 'created_at DESC, seq DESC');
  return { sql, params };
}
