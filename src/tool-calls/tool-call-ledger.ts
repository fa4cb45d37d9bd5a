import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { Envelope } from '../common/crypto/envelope-cipher.js';
import { isDatabaseUnavailable } from '../common/errors/database-errors.js';
import { newId } from '../common/ids.js';
import { Sql } from '../db/sql.js';
import type { NewLedgerEvent } from '../ledger/ledger-events.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { ORPHANED_TEXT } from './orphan-sweeper.service.js';
import { resumableWrite, retryWhileUnavailable } from './outcome-retry.js';
import type { EncryptedResult } from './results.store.js';
import type { ToolCallStatus } from './tool-call-status.js';

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
}

export interface OutcomeRow {
  id: string;
  orgId: string;
  from: ToolCallStatus;
  status: ToolCallStatus;
  errorCode: string | null;
  errorText: string | null;
  httpStatus: number;
  outputRedacted: unknown;
  retryCount: number;
  retryAfterSeconds: number | null;
  vendorStatus: number | null;
  durationMs: number | null;
  costCents: number;
  truncated: boolean;
  result?: EncryptedResult;
  /** Delete the call's encrypted approved input in the same statement (an approved call has one). */
  dropInput?: boolean;
}

export type IntentResult = 'reserved' | 'exists' | 'run-ended' | 'key-revoked' | 'governance-changed';

/** How long a request waits for the database to take its outcome before answering 503. */
export const OUTCOME_WRITE_INLINE_MS = 3_000;
/**
 * How long the gateway keeps an outcome it could not write in memory, trying
 * again, after that answer. The orphan sweep settles a call running longer
 * than VENDOR_TIMEOUT_MS + STALE_RUNNING_MARGIN_MS; a write after that finds
 * it settled and stops.
 */
export const OUTCOME_WRITE_LATE_MS = 15 * 60_000;
/**
 * At shutdown, how long kept outcomes still get to reach a database that is
 * coming back before they are given up (well inside a container's stop grace
 * period: docker-compose gives 30 s).
 */
export const OUTCOME_WRITE_SHUTDOWN_GRACE_MS = 5_000;

/** Builds `INSERT INTO runtime_ledger_events … SELECT … WHERE EXISTS (SELECT 1 FROM <guard>)` for a CTE. */
function eventsCte(events: NewLedgerEvent[], params: unknown[], guard: string): string {
  const rows = events.map((e) => {
    const b = params.length;
    params.push(newId(), e.orgId, e.type, e.runId ?? null, e.toolCallId ?? null, e.actor ? JSON.stringify(e.actor) : null, JSON.stringify(e.metadata ?? {}));
    return `($${b + 1}::uuid, $${b + 2}::uuid, $${b + 3}::text, $${b + 4}::uuid, $${b + 5}::uuid, $${b + 6}::jsonb, $${b + 7}::jsonb, ${events.indexOf(e)})`;
  });
  return `INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata)
          SELECT v.id, v.org_id, v.type, v.run_id, v.tool_call_id, v.actor, v.metadata
            FROM (VALUES ${rows.join(', ')}) AS v(id, org_id, type, run_id, tool_call_id, actor, metadata, ord)
           WHERE EXISTS (SELECT 1 FROM ${guard}) ORDER BY v.ord`;
}

/**
 * The two durable writes of a tool call, each ONE statement (so one round trip
 * and its own transaction): the intent (idempotency reservation + row + policy
 * decision + approval + events) and the outcome (row + encrypted result +
 * events). Nothing is held open while the vendor is called.
 */
/** An outcome write the database refused (unavailable); `kept`: it is retried in the background. */
export class OutcomeNotWritten extends Error {
  override readonly name = 'OutcomeNotWritten';
  constructor(
    readonly kept: boolean,
    override readonly cause: unknown,
  ) {
    super('the outcome could not be written: the database is unavailable');
  }
}

@Injectable()
export class ToolCallLedger implements OnApplicationShutdown {
  private readonly log = new Logger('ToolCallLedger');
  /**
   * Aborted once the HTTP drain is over (onApplicationShutdown, before the
   * database pool closes): outcome writes kept in memory stop waiting. Not
   * earlier: requests still draining must ride out a database blip as always.
   */
  private readonly closing = new AbortController();
  /** Outcome writes still trying after their request was answered 503. */
  private readonly late = new Set<Promise<void>>();
  /** Vendor calls in flight whose outcome is still to be written (see track). */
  private readonly working = new Set<Promise<unknown>>();

  constructor(
    private readonly sql: Sql,
    private readonly metrics: MetricsService,
  ) {}

  /**
   * After the HTTP drain, before the pool closes: first the vendor calls still
   * running (their clients may be gone; ApprovedCallRunner's module waits for
   * its own earlier), then kept outcomes get a last grace to land, then stop
   * (the orphan sweep settles what did not).
   */
  async onApplicationShutdown(): Promise<void> {
    // Node's server.close() ends with the sockets, not with the handlers: a call whose client went away
    // is still at the vendor, and its outcome must be written before the pool closes.
    await Promise.allSettled([...this.working]);
    if (this.late.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, OUTCOME_WRITE_SHUTDOWN_GRACE_MS)));
      await Promise.race([Promise.allSettled([...this.late]), grace]);
      clearTimeout(timer);
    }
    this.closing.abort();
    await Promise.allSettled([...this.late]);
  }

  /** Work that ends by writing an outcome (a vendor call in flight): shutdown waits for it before anything closes. */
  track<T>(work: Promise<T>): Promise<T> {
    this.working.add(work);
    const done = (): void => void this.working.delete(work);
    work.then(done, done);
    return work;
  }

  /** Outcome writes kept in memory, still trying (for tests and metrics). */
  get lateOutcomeWrites(): number {
    return this.late.size;
  }

  /**
   * `reserved`: this request reserved the idempotency key and recorded the call; `exists`: the key
   * already existed (a replay); `run-ended`: the run is no longer active (completed or cancelled,
   * perhaps on another replica since this one cached it), so nothing was written; `key-revoked`: the
   * API key the call came with was revoked since the request was authenticated (a long batch, or
   * another replica's revocation inside its cache window), so nothing was written; `governance-changed`:
   * the org's flag or policy is no longer what the decision was made on (changed on another replica
   * inside this one's cache window), so nothing was written and the call must be decided again.
   */
  async writeIntent(row: IntentRow, events: NewLedgerEvent[], policy: PolicyDecisionRow | null, approval: ApprovalRow | null): Promise<IntentResult> {
    const p: unknown[] = [
      row.id, row.orgId, row.runId, row.specialistId, row.toolName, row.action, row.vendor, row.status, row.errorCode, row.errorText,
      row.httpStatus, row.correlationId, row.idempotencyKey, row.toolUseId, row.actionDigest, JSON.stringify(row.inputRedacted),
      row.riskLevel, row.policyDecisionId, row.actorKeyId, row.decidedOn.flagEnabled, row.decidedOn.policyVersion,
    ];
    const running = row.status === 'running';
    const settled = row.status === 'blocked' || row.status === 'failed';
    // The run's status is read in the statement itself, so a run ended on another replica stops new calls at
    // once, and under a KEY SHARE lock (the one the foreign key takes anyway): ending a run takes the row FOR
    // UPDATE, so it waits for intents in flight, and an intent that waited for an end re-reads the run as ended.
    const ctes = [
      `live AS (SELECT 1 FROM agent_runs WHERE id = $3 AND status IN ('running', 'waiting_approval') FOR KEY SHARE)`,
      // The key is read here too: a revocation (on any replica) stops new calls at once, not when a cache expires.
      `actor AS (SELECT 1 FROM api_keys WHERE id = $19 AND revoked_at IS NULL)`,
      // And what the decision was made on: a flag turned off or a policy replaced on another replica (whose
      // caches here may be up to a second old) stops the call at once; the caller decides again on fresh reads.
      `gov AS (SELECT COALESCE((SELECT enabled FROM feature_flags WHERE org_id = $2 AND flag = 'tool_calling_enabled'), false) = $20
                  AND COALESCE((SELECT version FROM policies WHERE org_id = $2), 0) = $21 AS ok)`,
      `tc AS (INSERT INTO tool_calls (id, org_id, run_id, specialist_id, tool_name, action, vendor, status, error_code, error_text, http_status,
                correlation_id, idempotency_key, tool_use_id, action_digest, input_redacted, risk_level, policy_decision_id, actor_key_id,
                started_at, finished_at)
              SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16::jsonb, $17, $18, $19,
                ${running ? 'now()' : 'NULL'}, ${settled ? 'now()' : 'NULL'}
               WHERE EXISTS (SELECT 1 FROM live) AND EXISTS (SELECT 1 FROM actor) AND (SELECT ok FROM gov)
              ON CONFLICT (org_id, idempotency_key) DO NOTHING RETURNING id)`,
    ];
    if (policy) {
      const b = p.length;
      p.push(policy.id, policy.decision, policy.riskLevel, policy.ruleId, policy.reason);
      ctes.push(`pd AS (INSERT INTO policy_decisions (id, org_id, tool_call_id, decision, risk_level, rule_id, reason, action_digest)
                        SELECT $${b + 1}, $2, tc.id, $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $15 FROM tc)`);
    }
    if (approval) {
      const b = p.length;
      p.push(approval.id, approval.kind, approval.riskLevel, approval.reason, approval.expiresAt);
      ctes.push(`ap AS (INSERT INTO approval_requests (id, org_id, tool_call_id, run_id, kind, status, tool_name, action, input_redacted,
                          risk_level, reason, action_digest, expires_at)
                        SELECT $${b + 1}, $2, tc.id, $3, $${b + 2}, 'pending', $5, $6, $16::jsonb, $${b + 3}, $${b + 4}, $15, $${b + 5} FROM tc)`);
      const c = p.length;
      p.push(approval.input.keyId, approval.input.iv, approval.input.ciphertext, approval.input.authTag);
      ctes.push(`ti AS (INSERT INTO tool_call_inputs (tool_call_id, org_id, key_id, iv, ciphertext, auth_tag)
                        SELECT tc.id, $2, $${c + 1}, $${c + 2}, $${c + 3}, $${c + 4} FROM tc)`);
      ctes.push(`ru AS (UPDATE agent_runs SET pending_approval_count = pending_approval_count + 1, status = 'waiting_approval', updated_at = now()
                         WHERE id = $3 AND status IN ('running', 'waiting_approval') AND EXISTS (SELECT 1 FROM tc))`);
    }
    ctes.push(`ev AS (${eventsCte(events, p, 'tc')})`);
    const t0 = performance.now();
    // `mine`: this very call's row, committed by an earlier attempt of this statement whose answer was lost (the
    // statement's snapshot sees committed rows only, never the one its own INSERT makes). It is this request's
    // intent, recorded once: the INSERT and everything hanging off it found the key taken and wrote nothing.
    const [res] = await this.sql.prepared<{ id: string | null; live: boolean; key_live: boolean; gov_ok: boolean; mine: boolean }>(
      `WITH ${ctes.join(',\n')} SELECT (SELECT id FROM tc) AS id, EXISTS (SELECT 1 FROM live) AS live, EXISTS (SELECT 1 FROM actor) AS key_live,
              (SELECT ok FROM gov) AS gov_ok, EXISTS (SELECT 1 FROM tool_calls WHERE id = $1) AS mine`,
      p,
    );
    this.metrics.ledgerWrite.observe({ kind: 'intent' }, (performance.now() - t0) / 1000);
    if (res.id !== null) return 'reserved';
    if (res.mine) {
      // The orphan sweep's clock starts again: the vendor call starts only now.
      if (running) await this.sql.query(`UPDATE tool_calls SET started_at = now() WHERE id = $1 AND status = 'running'`, [row.id]);
      return 'reserved';
    }
    if (!res.key_live) return 'key-revoked';
    if (!res.live) return 'run-ended';
    return res.gov_ok ? 'exists' : 'governance-changed';
  }

  /**
   * writeOutcome, riding out a database that is briefly unavailable: new
   * attempts for up to OUTCOME_WRITE_INLINE_MS. If it is still down, an
   * OutcomeNotWritten is thrown (the request answers 503) and the outcome is
   * kept and retried in the background, unless the gateway is stopping;
   * `lateWrite` is told whether it was recorded then.
   */
  async writeOutcomeDurably(o: OutcomeRow, events: NewLedgerEvent[], lateWrite: (written: boolean) => void): Promise<boolean> {
    const attempt = this.attemptOutcome(o, events);
    try {
      return await retryWhileUnavailable(attempt, { budgetMs: OUTCOME_WRITE_INLINE_MS, capMs: 1_000 });
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      throw new OutcomeNotWritten(this.keepTrying(o, attempt, lateWrite), err);
    }
  }

  /** writeOutcome attempts that tell an outcome of ours committed without its answer from one settled elsewhere. */
  private attemptOutcome(o: OutcomeRow, events: NewLedgerEvent[]): () => Promise<boolean> {
    return resumableWrite(() => this.writeOutcome(o, events), () => this.holdsOutcome(o));
  }

  /**
   * Whether the call's row holds this outcome: same status, error code and
   * duration (the orphan sweep records no duration, an ops reconcile keeps the
   * indeterminate call's). Read after a write whose answer was lost.
   */
  async holdsOutcome(o: Pick<OutcomeRow, 'id' | 'status' | 'errorCode' | 'durationMs'>): Promise<boolean> {
    const [row] = await this.sql.query<{ mine: boolean }>(
      `SELECT (status = $2 AND error_code IS NOT DISTINCT FROM $3 AND duration_ms IS NOT DISTINCT FROM $4) AS mine FROM tool_calls WHERE id = $1`,
      [o.id, o.status, o.errorCode, o.durationMs],
    );
    return row?.mine === true;
  }

  /** Keeps retrying in the background; false when it cannot (the gateway is stopping). */
  private keepTrying(o: OutcomeRow, attempt: () => Promise<boolean>, lateWrite: (written: boolean) => void): boolean {
    const fields = { toolCallId: o.id, status: o.status };
    if (this.closing.signal.aborted) {
      this.log.warn(fields, 'outcome not recorded (database unavailable while stopping): the orphan sweep will mark the call indeterminate');
      return false;
    }
    this.log.warn(fields, 'outcome not recorded yet (database unavailable): kept in memory, retrying');
    const task = retryWhileUnavailable(attempt, { budgetMs: OUTCOME_WRITE_LATE_MS, capMs: 5_000, signal: this.closing.signal }).then(
      (written) => {
        this.log.log(fields, written ? 'outcome recorded after the database came back' : 'outcome not recorded: the call was settled elsewhere meanwhile');
        lateWrite(written);
      },
      (err: unknown) => {
        // A code, not the error's text: a statement's error may quote its values.
        const code = (err as { code?: unknown } | null)?.code;
        const reason = isDatabaseUnavailable(err) ? 'database unavailable' : typeof code === 'string' ? `error ${code}` : 'write failed';
        this.log.warn({ ...fields, reason }, 'outcome not recorded: the orphan sweep will mark the call indeterminate');
      },
    );
    this.late.add(task);
    void task.finally(() => this.late.delete(task));
    return true;
  }

  /**
   * Records the outcome if the call is still in `from`; false when someone else settled it first.
   * When that someone was the orphan sweep (it guessed "its process died" after a database outage
   * outlasted VENDOR_TIMEOUT_MS plus the margin, while this process kept the real outcome), the
   * call stays `indeterminate` (terminal states change only by an ops reconcile, ARCHITECTURE.md
   * "States"), and a `tool_call.outcome_after_sweep` event records what the vendor answered, for
   * the reconcile to go on.
   */
  async writeOutcome(o: OutcomeRow, events: NewLedgerEvent[]): Promise<boolean> {
    const p: unknown[] = [
      o.id, o.status, o.errorCode, o.errorText, o.httpStatus, o.outputRedacted === undefined ? null : JSON.stringify(o.outputRedacted),
      o.retryCount, o.retryAfterSeconds, o.vendorStatus, o.durationMs, o.costCents, o.truncated, o.from, ORPHANED_TEXT,
    ];
    const ctes = [
      `tc AS (UPDATE tool_calls SET status = $2, error_code = $3, error_text = $4, http_status = $5, output_redacted = $6::jsonb,
                retry_count = $7, retry_after_seconds = $8, vendor_status = $9, duration_ms = $10, cost_cents = $11, truncated = $12,
                finished_at = now(), updated_at = now()
              WHERE id = $1 AND status = $13 RETURNING id, org_id)`,
      // Reads the row as it was before this statement: only when the update above found it swept (no duration:
      // the sweep's verdict, not an outcome of ours), and also once ops have reconciled it since — the vendor's
      // real answer is then the evidence for or against that finding.
      `late AS (INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, metadata)
                SELECT gen_random_uuid(), t.org_id, 'tool_call.outcome_after_sweep', t.run_id, t.id,
                       jsonb_build_object('toolName', t.tool_name, 'action', t.action, 'digest', t.action_digest, 'status', $2::text,
                                          'errorCode', $3::text, 'vendorStatus', $9::int, 'durationMs', $10::int,
                                          'reconciled', t.note IS NOT NULL)
                  FROM tool_calls t
                 WHERE t.id = $1 AND $13 = 'running' AND t.duration_ms IS NULL
                   AND ((t.status = 'indeterminate' AND t.error_text = $14 AND t.note IS NULL) OR t.note IS NOT NULL)
                   AND NOT EXISTS (SELECT 1 FROM tc))`,
    ];
    if (o.result) {
      const b = p.length;
      p.push(o.result.keyId, o.result.iv, o.result.ciphertext, o.result.authTag, o.result.sizeBytes, o.result.expiresAt);
      ctes.push(`rs AS (INSERT INTO tool_call_results (tool_call_id, org_id, key_id, iv, ciphertext, auth_tag, size_bytes, expires_at)
                        SELECT tc.id, tc.org_id, $${b + 1}, $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $${b + 6} FROM tc
                        ON CONFLICT (tool_call_id) DO NOTHING)`);
    }
    if (o.dropInput) ctes.push('ti AS (DELETE FROM tool_call_inputs i USING tc WHERE i.tool_call_id = tc.id)');
    ctes.push(`ev AS (${eventsCte(events, p, 'tc')})`);
    const t0 = performance.now();
    const rows = await this.sql.prepared<{ id: string }>(`WITH ${ctes.join(',\n')} SELECT id FROM tc`, p);
    this.metrics.ledgerWrite.observe({ kind: 'outcome' }, (performance.now() - t0) / 1000);
    return rows.length === 1;
  }
}
