import type { Sql } from '../db/sql.js';
import type { NewLedgerEvent } from '../ledger/ledger-events.service.js';
import type { MetricsService } from '../metrics/metrics.service.js';
import { eventsCte } from './ledger-events-cte.js';
import { ORPHANED_TEXT } from './orphan-sweeper.service.js';
import { ledgerOutputJson } from './ledger-output-cap.js';
import type { EncryptedResult } from './results.store.js';
import type { ToolCallStatus } from './tool-call-status.js';

/** The events that settle a call with its outcome, the last of writeOutcomeRow's. */
const SETTLING_TYPES: ReadonlySet<string> = new Set(['tool_call.succeeded', 'tool_call.failed', 'tool_call.indeterminate']);
/** `outputDigest`: the SHA-256 (hex) of the stored output's jsonb text ($6, as the row stores it), null for none. */
const OUTPUT_DIGEST_SQL = `jsonb_build_object('outputDigest', encode(sha256(convert_to($6::jsonb::text, 'UTF8')), 'hex'))`;

export interface OutcomeRow {
  id: string;
  orgId: string;
  from: ToolCallStatus;
  status: ToolCallStatus;
  errorCode: string | null;
  errorText: string | null;
  httpStatus: number;
  /** The redacted vendor result; stored whole up to LEDGER_OUTPUT_MAX_BYTES of JSON, else as a truncated stub. */
  outputRedacted: unknown;
  retryCount: number;
  retryAfterSeconds: number | null;
  vendorStatus: number | null;
  /** For a failure at the vendor: a refusal of the input (true) or trouble on its side (false); else null. */
  vendorRefused: boolean | null;
  durationMs: number | null;
  costCents: number;
  truncated: boolean;
  result?: EncryptedResult;
  /** Delete the call's encrypted approved input in the same statement (an approved call has one). */
  dropInput?: boolean;
  /** The key that posted the call, named by its outcome_after_sweep event as by its other outcome events (none: null). */
  actor?: { keyId: string; role: string } | null;
  /** When the outcome was known (performance.now()): finished_at is that time, however late the write. */
  knownAtMs?: number;
}

/**
 * Whether the call's row holds this outcome: same status, error code and
 * duration (the orphan sweep records no duration, an ops reconcile keeps the
 * indeterminate call's). Read after a write whose answer was lost.
 */
export async function rowHoldsOutcome(sql: Sql, o: Pick<OutcomeRow, 'id' | 'status' | 'errorCode' | 'durationMs'>): Promise<boolean> {
  const [row] = await sql.query<{ mine: boolean }>(
    `SELECT (status = $2 AND error_code IS NOT DISTINCT FROM $3 AND duration_ms IS NOT DISTINCT FROM $4) AS mine FROM tool_calls WHERE id = $1`,
    [o.id, o.status, o.errorCode, o.durationMs],
  );
  return row?.mine === true;
}

/**
 * Records the outcome if the call is still in `from`; false when someone else settled it first.
 * When that someone was the orphan sweep (it guessed "its process died" after a database outage
 * outlasted VENDOR_TIMEOUT_MS plus the margin, while this process kept the real outcome), the
 * call stays `indeterminate` (terminal states change only by an ops reconcile, ARCHITECTURE.md
 * "States"), and a `tool_call.outcome_after_sweep` event records what the vendor answered, for
 * the reconcile to go on.
 */
export async function writeOutcomeRow(sql: Sql, metrics: MetricsService, o: OutcomeRow, events: NewLedgerEvent[]): Promise<boolean> {
  const p: unknown[] = [
    o.id, o.status, o.errorCode, o.errorText, o.httpStatus, o.outputRedacted === undefined ? null : ledgerOutputJson(o.outputRedacted),
    o.retryCount, o.retryAfterSeconds, o.vendorStatus, o.durationMs, o.costCents, o.truncated, o.from, ORPHANED_TEXT, o.vendorRefused,
    o.actor ? JSON.stringify(o.actor) : null,
    // Seconds since the outcome was known: finished_at is then, not when a write kept through an outage landed (a
    // vendor's Retry-After is counted down from it on replays: remainingWait).
    o.knownAtMs === undefined ? 0 : Math.max(0, (performance.now() - o.knownAtMs) / 1000),
  ];
  const ctes = [
    `tc AS (UPDATE tool_calls SET status = $2, error_code = $3, error_text = $4, http_status = $5, output_redacted = $6::jsonb,
                retry_count = $7, retry_after_seconds = $8, vendor_status = $9, duration_ms = $10, cost_cents = $11, truncated = $12,
                vendor_refused = $15, updated_at = now(),
                finished_at = greatest(coalesce(started_at, now()), now() - make_interval(secs => $17::double precision))
              WHERE id = $1 AND status = $13 RETURNING id, org_id)`,
    // Only when the update above found the row swept (no duration: the sweep's verdict, not an outcome of ours),
    // and also once ops have reconciled it since — the vendor's real answer is then the evidence for or against
    // that finding. Once per call: a call has one vendor answer, and a resend of this statement whose first try
    // committed with its answer lost finds the row still swept (ledger_events_call_idx keeps the check cheap).
    // Locked, so that `late`, `uncharge` and `rs` decide on the row as it is now: a reconcile still uncommitted
    // when this statement took its snapshot is waited for, and its note and status read (the row re-checked, as
    // an UPDATE's is), rather than the snapshot's "not reconciled" zeroing a reconciled call's charge or keeping a
    // result for a call reconciled as failed. No lock in the ordinary case: `tc` settled the row, nothing is read.
    `swept AS (SELECT t.id, t.org_id, t.run_id, t.tool_name, t.action, t.action_digest, t.note, t.status
                 FROM tool_calls t
                WHERE t.id = $1 AND $13 = 'running' AND t.duration_ms IS NULL
                  AND ((t.status = 'indeterminate' AND t.error_text = $14 AND t.note IS NULL) OR t.note IS NOT NULL)
                  AND NOT EXISTS (SELECT 1 FROM tc)
                  AND NOT EXISTS (SELECT 1 FROM runtime_ledger_events e
                                   WHERE e.tool_call_id = t.id AND e.type = 'tool_call.outcome_after_sweep')
                  FOR NO KEY UPDATE OF t)`,
    `late AS (INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata)
                SELECT gen_random_uuid(), t.org_id, 'tool_call.outcome_after_sweep', t.run_id, t.id, $16::jsonb,
                       jsonb_build_object('toolName', t.tool_name, 'action', t.action, 'digest', t.action_digest, 'status', $2::text,
                                          'errorCode', $3::text, 'vendorStatus', $9::int, 'durationMs', $10::int,
                                          'reconciled', t.note IS NOT NULL, 'costCents', $11::int)
                  FROM swept t)`,
    // The sweep charges what may have been sent (OrphanSweeperService); an outcome that knows nothing reached the
    // vendor (cost 0: an unsent call, recordUnsent) takes that guess back, unless ops have reconciled the call since.
    `uncharge AS (UPDATE tool_calls SET cost_cents = 0, updated_at = now()
                   WHERE id = $1 AND $11::int = 0 AND EXISTS (SELECT 1 FROM swept WHERE note IS NULL))`,
  ];
  if (o.result) {
    const b = p.length;
    p.push(o.result.keyId, o.result.iv, o.result.ciphertext, o.result.authTag, o.result.sizeBytes, o.result.expiresAt);
    // Also for a swept call (its late answer recorded by `late`): the vendor's result is kept for the result TTL, so
    // once ops reconcile the call as succeeded, on that event's word, the agent is handed what the vendor answered.
    // Not for one already reconciled as failed: no one could ever read it.
    ctes.push(`rs AS (INSERT INTO tool_call_results (tool_call_id, org_id, key_id, iv, ciphertext, auth_tag, size_bytes, expires_at)
                        SELECT k.id, k.org_id, $${b + 1}, $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $${b + 6}
                          FROM (SELECT id, org_id FROM tc UNION ALL SELECT id, org_id FROM swept WHERE status <> 'failed') k
                        ON CONFLICT (tool_call_id) DO NOTHING)`);
  }
  if (o.dropInput) ctes.push('ti AS (DELETE FROM tool_call_inputs i USING tc WHERE i.tool_call_id = tc.id)');
  // The settling event records the output by its digest as stored (jsonb's text: the row's own form), so that verify
  // finds a result rewritten around the gateway (tool-call-check.ts); no output is a null digest.
  ctes.push(`ev AS (${eventsCte(events, p, 'tc', (e) => (SETTLING_TYPES.has(e.type) ? OUTPUT_DIGEST_SQL : null))})`);
  const text = `WITH ${ctes.join(',\n')} SELECT id FROM tc`;
  const rows = await metrics.timedLedgerWrite('outcome', async () => {
    const first = await sql.prepared<{ id: string }>(text, p);
    if (first.length > 0 || o.from !== 'running') return first;
    // Settled by someone else. If that was the sweep's statement, still uncommitted when this one took its snapshot,
    // `tc` waited for it and found the row indeterminate, while `swept` read the row as running in the old snapshot:
    // the vendor's answer (or "not sent") was recorded nowhere. Sent once more, it reads the settle as committed;
    // `tc` stays a no-op, the late event is written at most once, the charge taken back only from a swept row.
    return await sql.prepared<{ id: string }>(text, p);
  });
  return rows.length === 1;
}
