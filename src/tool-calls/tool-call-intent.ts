import type { Envelope } from '../common/crypto/envelope-cipher.js';
import type { Sql } from '../db/sql.js';
import type { NewLedgerEvent } from '../ledger/ledger-events.service.js';
import type { MetricsService } from '../metrics/metrics.service.js';
import { eventsCte } from './ledger-events-cte.js';
import type { ToolCallStatus } from './tool-call-status.js';
import { apiKeyLockSharedSql, governanceLocksSharedSql } from '../db/advisory-locks.js';

/** `inputDigest`: the SHA-256 (hex) of the stored input's jsonb text ($16, as the row stores it). */
const INPUT_DIGEST_SQL = `jsonb_build_object('inputDigest', encode(sha256(convert_to($16::jsonb::text, 'UTF8')), 'hex'))`;

export interface IntentRow {
  id: string;
  orgId: string;
  runId: string;
  specialistId: string;
  toolName: string;
  action: string;
  vendor: string | null;
  status: ToolCallStatus;
  errorCode: string | null;
  errorText: string | null;
  httpStatus: number;
  correlationId: string;
  idempotencyKey: string;
  toolUseId: string;
  actionDigest: string;
  inputRedacted: unknown;
  riskLevel: string | null;
  policyDecisionId: string | null;
  actorKeyId: string;
  /** What the decision was made on: the intent is written only while the org's flag and policy are still these. */
  decidedOn: { flagEnabled: boolean; policyVersion: number };
  /** A running call's: how long this replica may hold it (VENDOR_TIMEOUT_MS + STALE_RUNNING_MARGIN_MS; the orphan sweep's judge). */
  staleAfterMs: number;
}

export interface PolicyDecisionRow {
  id: string;
  decision: string;
  riskLevel: string;
  ruleId: string | null;
  reason: string;
}

export interface ApprovalRow {
  id: string;
  kind: 'expert' | 'client';
  reason: string;
  riskLevel: string;
  expiresAt: Date;
  /** The raw params, encrypted, so the approved call runs with exactly what was approved. */
  input: Envelope;
  /** Whether the redacted input the approver reads is the input itself (redaction/shown-exactly.ts). */
  inputShownExactly: boolean;
}

export type IntentResult = 'reserved' | 'exists' | 'run-ended' | 'key-revoked' | 'governance-changed' | 'recorded-then-stopped';

/**
 * `reserved`: this request reserved the idempotency key and recorded the call; `exists`: the key, or
 * the tool_use id in this run, was taken already (a replay); `run-ended`: the run is no longer active (completed or cancelled,
 * perhaps on another replica since this one cached it), so nothing was written; `key-revoked`: the
 * API key the call came with was revoked since the request was authenticated (a long batch, or
 * another replica's revocation inside its cache window), so nothing was written; `governance-changed`:
 * the org's flag or policy is no longer what the decision was made on (changed on another replica
 * inside this one's cache window), so nothing was written and the call must be decided again;
 * `recorded-then-stopped`: a resend found the running call its earlier attempt recorded (the answer lost), but the run,
 * the flag, the policy or the key changed between the attempts: recorded, and to be settled as not sent.
 */
export async function writeIntentRow(
  sql: Sql,
  metrics: MetricsService,
  row: IntentRow,
  events: NewLedgerEvent[],
  policy: PolicyDecisionRow | null,
  approval: ApprovalRow | null,
  resent = false,
): Promise<IntentResult> {
  const p: unknown[] = [
    row.id, row.orgId, row.runId, row.specialistId, row.toolName, row.action, row.vendor, row.status, row.errorCode, row.errorText,
    row.httpStatus, row.correlationId, row.idempotencyKey, row.toolUseId, row.actionDigest, JSON.stringify(row.inputRedacted),
    row.riskLevel, row.policyDecisionId, row.actorKeyId, row.decidedOn.flagEnabled, row.decidedOn.policyVersion,
  ];
  const running = row.status === 'running';
  const settled = row.status === 'blocked' || row.status === 'failed';
  // Only a running call's is written: a parameter the statement does not use has no type PostgreSQL can infer.
  const staleAfter = running ? `$${p.push(row.staleAfterMs)}::int` : 'NULL';
  // The run's status is read in the statement itself, so a run ended on another replica stops new calls at
  // once, and under a KEY SHARE lock (the one the foreign key takes anyway): ending a run takes the row FOR
  // UPDATE, so it waits for intents in flight, and an intent that waited for an end re-reads the run as ended.
  const ctes = [
    `live AS (SELECT 1 FROM agent_runs WHERE id = $3 AND status IN ('running', 'waiting_approval') FOR KEY SHARE)`,
    // And what the decision was made on: a flag turned off or a policy replaced on another replica (whose
    // caches here may be up to a second old) stops the call at once; the caller decides again on fresh reads.
    // Read FOR SHARE, like the run: a flag or policy change waits for intents in flight, and an intent that
    // waited for one (or for a lock on its run) reads the row as the change left it, not as its snapshot had
    // it: a kill switch answered 200 is in force for every call recorded after it. (A first policy has no row
    // to lock yet: a call in flight as it is created may still be recorded under none.)
    // The org's flag and policy locks are taken shared first, so a change waiting for the calls in flight is not passed
    // by later ones (advisory-locks.ts, "Fair turns").
    `fair AS (${governanceLocksSharedSql('$2::uuid')})`,
    `gov AS (SELECT COALESCE((SELECT enabled FROM feature_flags WHERE org_id = $2 AND flag = 'tool_calling_enabled' FOR SHARE), false) = $20
                  AND COALESCE((SELECT version FROM policies WHERE org_id = $2 FOR SHARE), 0) = $21 AS ok FROM fair)`,
    // The key is read here too: a revocation (on any replica) stops new calls at once, not when a cache expires.
    // FOR SHARE (holdActorKey's lock), after the key's own lock taken shared (a revocation's turn, as for the flag), and
    // only once `gov` is read (keyfair names gov, which is read first): an intent that waited for a flag or policy change
    // reads the key as a revocation committed meanwhile left it, not as its snapshot had it, and a revocation waits only
    // for intents that have done their waiting.
    `keyfair AS (SELECT ${apiKeyLockSharedSql('$19::uuid')} AS k FROM gov)`,
    `actor AS (SELECT 1 FROM api_keys, keyfair WHERE id = $19 AND revoked_at IS NULL FOR SHARE OF api_keys)`,
    // No conflict target: the call is taken by its idempotency key (per org) or by its tool_use id (per run,
    // tool_calls_run_tool_use_uq), and either makes this a replay of the call already recorded.
    `tc AS (INSERT INTO tool_calls (id, org_id, run_id, specialist_id, tool_name, action, vendor, status, error_code, error_text, http_status,
                correlation_id, idempotency_key, tool_use_id, action_digest, input_redacted, risk_level, policy_decision_id, actor_key_id,
                started_at, finished_at, stale_after_ms)
              SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16::jsonb, $17, $18, $19,
                ${running ? 'now()' : 'NULL'}, ${settled ? 'now()' : 'NULL'}, ${staleAfter}
               WHERE EXISTS (SELECT 1 FROM live) AND EXISTS (SELECT 1 FROM actor) AND (SELECT ok FROM gov)
              ON CONFLICT DO NOTHING RETURNING id)`,
  ];
  if (policy) {
    const b = p.length;
    p.push(policy.id, policy.decision, policy.riskLevel, policy.ruleId, policy.reason);
    ctes.push(`pd AS (INSERT INTO policy_decisions (id, org_id, tool_call_id, decision, risk_level, rule_id, reason, action_digest)
                        SELECT $${b + 1}, $2, tc.id, $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $15 FROM tc)`);
  }
  if (approval) {
    const b = p.length;
    p.push(approval.id, approval.kind, approval.riskLevel, approval.reason, approval.expiresAt, approval.inputShownExactly);
    ctes.push(`ap AS (INSERT INTO approval_requests (id, org_id, tool_call_id, run_id, kind, status, tool_name, action, input_redacted,
                          input_shown_exactly, risk_level, reason, action_digest, expires_at)
                        SELECT $${b + 1}, $2, tc.id, $3, $${b + 2}, 'pending', $5, $6, $16::jsonb, $${b + 6}, $${b + 3}, $${b + 4}, $15, $${b + 5} FROM tc)`);
    const c = p.length;
    p.push(approval.input.keyId, approval.input.iv, approval.input.ciphertext, approval.input.authTag);
    ctes.push(`ti AS (INSERT INTO tool_call_inputs (tool_call_id, org_id, key_id, iv, ciphertext, auth_tag)
                        SELECT tc.id, $2, $${c + 1}, $${c + 2}, $${c + 3}, $${c + 4} FROM tc)`);
    ctes.push(`ru AS (UPDATE agent_runs SET pending_approval_count = pending_approval_count + 1, status = 'waiting_approval', updated_at = now()
                         WHERE id = $3 AND status IN ('running', 'waiting_approval') AND EXISTS (SELECT 1 FROM tc))`);
  }
  // The requested event holds the stored input to its digest (the SHA-256 of its jsonb text, as the row stores it, as
  // an outcome's event holds the output): verify finds the input rewritten around the gateway.
  ctes.push(`ev AS (${eventsCte(events, p, 'tc', (e) => (e.type === 'tool_call.requested' ? INPUT_DIGEST_SQL : null))})`);
  // `mine`: this very call's row, committed by an earlier attempt of this statement whose answer was lost (the
  // statement's snapshot sees committed rows only, never the one its own INSERT makes). It is this request's
  // intent, recorded once: the INSERT and everything hanging off it found the key taken and wrote nothing.
  const [res] = await metrics.timedLedgerWrite('intent', () =>
    sql.prepared<{ id: string | null; live: boolean; key_live: boolean; gov_ok: boolean; mine: boolean }>(
      `WITH ${ctes.join(',\n')} SELECT (SELECT id FROM tc) AS id, EXISTS (SELECT 1 FROM live) AS live, EXISTS (SELECT 1 FROM actor) AS key_live,
              (SELECT ok FROM gov) AS gov_ok, EXISTS (SELECT 1 FROM tool_calls WHERE id = $1) AS mine`,
      p,
    ),
  );
  if (res.id !== null) return 'reserved';
  // Only a resend can meet an earlier attempt of its own still committing (a replay's first send cannot).
  // A running call found as its own row (its earlier attempt committed, the answer lost) is sent only if its run, the
  // org's flag and policy and the key still stand: a run end, a kill switch or a revocation answered between the
  // attempts is in force, as it is between a retry's attempts. Else it is settled as not sent by the caller.
  if (res.mine && running && !(res.live && res.key_live && res.gov_ok)) return 'recorded-then-stopped';
  if (res.mine || (resent && res.key_live && res.live && res.gov_ok && (await committedSinceSnapshot(sql, row.id)))) {
    // The orphan sweep's clock starts again: the vendor call starts only now.
    if (running) await sql.query(`UPDATE tool_calls SET started_at = now() WHERE id = $1 AND status = 'running'`, [row.id]);
    return 'reserved';
  }
  if (!res.key_live) return 'key-revoked';
  if (!res.live) return 'run-ended';
  return res.gov_ok ? 'exists' : 'governance-changed';
}

/**
 * Whether this call's row exists now, read afresh after an intent statement found its key taken. An earlier
 * attempt the client gave up on (pg's query_timeout) may still have been running on the server: this statement's
 * INSERT then waited for it and found the key taken once it committed, while `mine`, read in the snapshot taken
 * before that commit, could not see the row. The intent's id is this request's alone, so the row is its own.
 */
async function committedSinceSnapshot(sql: Sql, id: string): Promise<boolean> {
  const [row] = await sql.query<{ mine: boolean }>('SELECT EXISTS (SELECT 1 FROM tool_calls WHERE id = $1) AS mine', [id]);
  return row?.mine === true;
}
