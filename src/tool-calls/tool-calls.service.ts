import { Inject, Injectable, Logger } from '@nestjs/common';
import { EventEmitter } from 'node:events';
import type { Principal } from '../auth/principal.js';
import { ToolCatalogService, type CatalogEntry } from '../catalog/tool-catalog.service.js';
import { actionDigest } from '../common/canonical-json.js';
import { Clock } from '../common/clock.js';
import { EnvelopeCipher } from '../common/crypto/envelope-cipher.js';
import { AppError } from '../common/errors/app-error.js';
import { newId } from '../common/ids.js';
import { storableText } from '../common/storable-text.js';
import { retryWhileUnavailable } from './outcome-retry.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { Sql } from '../db/sql.js';
import { ConcurrencyLeases } from '../executor/concurrency-lease.js';
import type { ExecutionOutcome } from '../executor/execution-outcome.js';
import { RuntimeToolExecutor } from '../executor/runtime-tool-executor.js';
import { LedgerEventsService, type NewLedgerEvent } from '../ledger/ledger-events.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { FeatureFlagsService } from '../orgs/feature-flags.service.js';
import { PoliciesService } from '../policy/policies.service.js';
import { redactInput, redactOutput } from '../redaction/redaction.service.js';
import { RunsService } from '../runs/runs.service.js';
import { decide } from './tool-call-decision.js';
import { buildToolCallBody, httpStatusFor, type StoredResult, type ToolCallBody } from './tool-call-body.js';
import { OutcomeNotWritten, ToolCallLedger } from './tool-call-ledger.js';
import { assertTransition } from './tool-call-lifecycle.js';
import type { ToolCallStatus } from './tool-call-status.js';
import { recordedAction, recordedToolName } from './recorded-action.js';
import { ResultsStore } from './results.store.js';
import { idempotencyKeyFor, parseToolUse } from './tool-use.js';

export interface ToolCallResponse {
  httpStatus: number;
  body: ToolCallBody;
  headers: Record<string, string>;
}

export interface StoredCall {
  id: string;
  org_id: string;
  run_id: string;
  tool_name: string;
  action: string;
  status: ToolCallStatus;
  error_code: string | null;
  error_text: string | null;
  http_status: number;
  action_digest: string;
  retry_after_seconds: number | null;
  vendor_status: number | null;
  idempotency_key: string;
  tool_use_id: string;
  approval_kind: 'expert' | 'client' | null;
  /** While waiting_approval: when its pending approval expires (null for every other status — nothing read for them). */
  approval_expires_at: Date | null;
  /** Settled by ops (reconcile is the only writer of `note`). */
  reconciled: boolean;
}

export const STORED_CALL_COLUMNS = `t.id, t.org_id, t.run_id, t.tool_name, t.action, t.status, t.error_code, t.error_text, t.http_status,
  t.action_digest, t.retry_after_seconds, t.vendor_status, t.idempotency_key, t.tool_use_id, (t.note IS NOT NULL) AS reconciled,
  (SELECT kind FROM approval_requests a WHERE a.tool_call_id = t.id) AS approval_kind,
  CASE WHEN t.status = 'waiting_approval' THEN (SELECT expires_at FROM approval_requests a WHERE a.tool_call_id = t.id AND a.status = 'pending') END
    AS approval_expires_at`;

/** Emits the id of every call this process settles (long-polls listen). */
export const settledCalls = new EventEmitter().setMaxListeners(0);

export const inputAad = (orgId: string, toolCallId: string): string => `input:${orgId}:${toolCallId}`;

/**
 * The governed tool call (ARCHITECTURE.md "The pipeline"): parse → run →
 * governance decision → ONE statement reserving the idempotency key and
 * recording the intent → vendor call outside any transaction → ONE statement
 * recording the outcome → tool_result.
 */
/** A platform key (orgId null) on an agent route (single call or batch). */
export const PLATFORM_KEY_REFUSED = "tool calls are made with an agent or admin key of the run's org; a platform key (orgId null) belongs to no org";

/** What an outcome records about the tool: names for the events and metrics, the cost of a vendor call. */
export interface RecordedTool {
  toolName: string;
  action: string;
  costCents: number;
}

export const recordedTool = (entry: CatalogEntry): RecordedTool => ({ toolName: entry.tool.name, action: entry.action.name, costCents: entry.action.costCents });

/** The key conflicted on insert, yet no row holds it: cannot happen (the row is never deleted). */
function conflictWithoutRow(): Error {
  return new Error('idempotency key conflict without a row');
}

/** A batch item after one still executing: not started (see ToolCallBatchService). */
function heldBehindEarlierItem(): AppError {
  return new AppError('IDEMPOTENCY_IN_PROGRESS', 'an earlier tool_use of this batch is still executing, so this one was not started; send the batch again shortly', {
    retryAfterSeconds: 1,
  });
}

/** How long an intent write is sent again while the database is unavailable (far below the orphan sweep's margin). */
const INTENT_WRITE_RETRY_MS = 3_000;

/** Decisions made again after the intent found the flag or policy changed (each time on fresh reads); more is a storm of admin changes. */
const GOVERNANCE_REDECIDE_MAX = 3;

@Injectable()
export class ToolCallsService {
  private readonly log = new Logger('ToolCalls');
  private readonly leases: ConcurrencyLeases;
  /**
   * Intent writes of lease holders in flight, by org + idempotency key. A
   * duplicate that finds the lease full waits for its twin's intent before
   * deciding, so it replays (409 in progress) instead of being refused 429
   * only because the twin's row was not committed yet.
   */
  private readonly intentsInFlight = new Map<string, Promise<void>>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly runs: RunsService,
    private readonly flags: FeatureFlagsService,
    private readonly catalog: ToolCatalogService,
    private readonly policies: PoliciesService,
    private readonly ledger: ToolCallLedger,
    private readonly executor: RuntimeToolExecutor,
    private readonly results: ResultsStore,
    private readonly cipher: EnvelopeCipher,
    private readonly events: LedgerEventsService,
    private readonly metrics: MetricsService,
    private readonly clock: Clock,
    private readonly sql: Sql,
  ) {
    this.leases = new ConcurrencyLeases(config.VENDOR_CONCURRENCY_LIMIT);
  }

  async submit(p: Principal, runId: string, body: unknown, idempotencyHeader: unknown, correlationId: string, attempt = 0): Promise<ToolCallResponse> {
    const { orgId, use, run, idempotencyKey, digest } = await this.identify(p, runId, body, idempotencyHeader);
    // The one form of the model's tool name and action that reaches the row, the events and the metrics (see recorded-action.ts).
    const toolName = recordedToolName(use.name, this.catalog);
    const action = recordedAction(use.name, use.action, this.catalog);
    // An ended run takes no new calls; a call it made before it ended is still answered (the agent may resend after a lost answer).
    if (run.status !== 'running' && run.status !== 'waiting_approval') return await this.replayByKey(orgId, idempotencyKey, digest, use.id, () => this.runEnded(run.id));

    const [flagEnabled, { rules, version: policyVersion }] = await Promise.all([this.flags.isEnabled(orgId, 'tool_calling_enabled'), this.policies.rulesFor(orgId)]);
    const decision = decide({
      flagEnabled,
      toolName: use.name,
      action: use.action,
      params: use.params,
      allowedTools: run.allowedTools,
      find: (t, a) => this.catalog.find(t, a),
      checkParams: (e, prm) => this.catalog.checkParams(e, prm),
      rules,
    });

    let release: (() => void) | null = null;
    if (decision.status === 'running') {
      release = this.leaseFor(orgId, decision.entry.vendor);
      if (!release) return this.concurrencyLimited(orgId, { keyId: p.keyId, role: p.role }, run.id, idempotencyKey, digest, use.id, decision.entry);
    }
    try {
      const id = newId();
      const policyDecisionId = 'policy' in decision && decision.policy ? newId() : null;
      const status = decision.status;
      assertTransition('requested', status);
      const errorCode = status === 'blocked' || status === 'failed' ? decision.errorCode : null;
      // INVALID_INPUT names the model's parameter, redacted by the catalog (checkParams); NOT_IN_MANIFEST names the run's actions of the tool.
      const errorText = 'errorText' in decision ? storableText(decision.errorText) : null;
      const entry = decision.entry;
      const facts = { toolName, action, digest };
      const actor = { keyId: p.keyId, role: p.role };
      const events: NewLedgerEvent[] = [{ orgId, type: 'tool_call.requested', runId: run.id, toolCallId: id, actor, metadata: facts }];
      if (status === 'blocked') {
        const reason = { FEATURE_DISABLED: 'feature_disabled', NOT_IN_MANIFEST: 'not_in_manifest', POLICY_BLOCKED: 'policy' }[decision.errorCode];
        events.push({ orgId, type: 'tool_call.blocked', runId: run.id, toolCallId: id, actor, metadata: { ...facts, errorCode, reason, ruleId: decision.policy?.ruleId ?? null } });
      } else if (status === 'failed') {
        events.push({ orgId, type: 'tool_call.failed', runId: run.id, toolCallId: id, actor, metadata: { ...facts, errorCode } });
      } else if (status === 'waiting_approval') {
        events.push({ orgId, type: 'tool_call.approval_requested', runId: run.id, toolCallId: id, actor, metadata: { ...facts, kind: decision.approvalKind, riskLevel: decision.policy.riskLevel, ruleId: decision.policy.ruleId } });
      } else {
        events.push({ orgId, type: 'tool_call.started', runId: run.id, toolCallId: id, actor, metadata: { ...facts, vendor: decision.entry.vendor } });
      }
      const policy = 'policy' in decision && decision.policy ? decision.policy : null;
      const approval =
        decision.status === 'waiting_approval'
          ? {
              id: newId(),
              kind: decision.approvalKind,
              reason: decision.policy.reason,
              riskLevel: decision.policy.riskLevel,
              expiresAt: new Date(this.clock.nowMs() + this.config.APPROVAL_TTL_SECONDS * 1000),
              input: this.cipher.encryptJson(use.params, inputAad(orgId, id)),
            }
          : null;
      // Sent again while the database is briefly unavailable: an attempt that committed with its answer lost is
      // found as this call's own row (writeIntent), so the call is recorded once and still runs.
      const intent = retryWhileUnavailable(() => this.ledger.writeIntent(
        {
          id, orgId, runId: run.id, specialistId: run.specialistId, toolName, action, vendor: entry?.vendor ?? null,
          status, errorCode, errorText, httpStatus: httpStatusFor(status, errorCode), correlationId, idempotencyKey, toolUseId: use.id,
          actionDigest: digest, inputRedacted: redactInput(use.params), riskLevel: policy?.riskLevel ?? entry?.action.riskLevel ?? null,
          policyDecisionId, actorKeyId: p.keyId, decidedOn: { flagEnabled, policyVersion },
        },
        events,
        policy && policyDecisionId ? { id: policyDecisionId, ...policy } : null,
        approval,
      ), { budgetMs: INTENT_WRITE_RETRY_MS, capMs: 500 });
      if (release) this.trackIntent(`${orgId}:${idempotencyKey}`, intent);
      const written = await intent;
      if (written === 'key-revoked') throw new AppError('UNAUTHENTICATED', 'a valid API key is required');
      if (written === 'run-ended') return await this.replayByKey(orgId, idempotencyKey, digest, use.id, () => this.runEnded(run.id));
      if (written === 'exists') return await this.replayByKey(orgId, idempotencyKey, digest, use.id, conflictWithoutRow);
      if (written === 'governance-changed') {
        // Changed on another replica inside this one's cache window: decide again on fresh reads, the lease given back first.
        this.flags.forget(orgId);
        this.policies.forget(orgId);
        release?.();
        release = null;
        if (attempt >= GOVERNANCE_REDECIDE_MAX) throw new AppError('CONFLICT', "the organization's flag or policy kept changing while this call was decided; send it again");
        return await this.submit(p, runId, body, idempotencyHeader, correlationId, attempt + 1);
      }
      if (status !== 'running') {
        this.count(toolName, action, status, errorCode);
        const facts2 = { id, status, errorCode, errorText, retryAfterSeconds: null, approvalKind: approval?.kind ?? null };
        return this.respond(buildToolCallBody(facts2, { found: false }, use.id, false, this.config.RESULT_BUDGET_BYTES), httpStatusFor(status, errorCode), false);
      }
      const runEntry = decision.entry;
      // Tracked: a shutdown waits for it even when the client has gone (the vendor acts all the same).
      return await this.ledger.track(
        (async () => {
          const outcome = await this.executor.execute({ entry: runEntry, orgId, toolCallId: id, idempotencyKey, params: use.params });
          // The lease counts calls at the vendor: give it back before the outcome commit.
          release?.();
          release = null;
          return await this.recordOutcome({ id, orgId, runId: run.id, tool: recordedTool(runEntry), toolUseId: use.id, digest, from: 'running' }, outcome);
        })(),
      );
    } finally {
      release?.();
    }
  }

  /**
   * A slot of the org × vendor concurrency limit (VENDOR_CONCURRENCY_LIMIT), or
   * null when it is full; the caller gives it back once the vendor has answered.
   * Approved calls take one too, so approving many at once cannot exceed it.
   */
  leaseFor(orgId: string, vendor: string): (() => void) | null {
    return this.leases.acquire(`${orgId}:${vendor}`);
  }

  /** Writes the outcome of an executed call and answers with the tool-call body. Also used by approvals. */
  async recordOutcome(
    c: { id: string; orgId: string; runId: string; tool: RecordedTool; toolUseId: string; digest: string; from: ToolCallStatus; dropInput?: boolean },
    outcome: ExecutionOutcome,
  ): Promise<ToolCallResponse> {
    const now = this.clock.now();
    const status = outcome.status;
    assertTransition(c.from, status);
    const errorCode = outcome.status === 'succeeded' ? null : outcome.errorCode;
    const json = outcome.status === 'succeeded' ? (JSON.stringify(outcome.result) ?? 'null') : null;
    // Charged only when a request reached, or may have reached, the vendor (the executor knows; a write
    // that may have been sent counts as sent). Not the error code: CREDENTIALS_INVALID is a vendor 401
    // (charged) or undecryptable stored credentials (nothing sent), VENDOR_TIMEOUT may be a connect timeout.
    const vendorReached = outcome.vendorReached;
    const base = { toolName: c.tool.toolName, action: c.tool.action, digest: c.digest };
    const events: NewLedgerEvent[] = outcome.retries.map((r) => ({
      orgId: c.orgId, type: 'tool_call.retried', runId: c.runId, toolCallId: c.id, metadata: { ...base, attempt: r.attempt, delayMs: r.delayMs, reason: r.reason },
    }));
    const terminal = status === 'succeeded' ? 'tool_call.succeeded' : status === 'failed' ? 'tool_call.failed' : 'tool_call.indeterminate';
    events.push({
      orgId: c.orgId, type: terminal, runId: c.runId, toolCallId: c.id,
      metadata: { ...base, durationMs: outcome.durationMs, errorCode, vendorStatus: outcome.vendorStatus, retryCount: outcome.retries.length },
    });
    const retryAfterSeconds = outcome.status !== 'succeeded' ? (outcome.retryAfterSeconds ?? null) : null;
    const row = {
      id: c.id, orgId: c.orgId, from: c.from, status, errorCode,
      errorText: outcome.status === 'succeeded' ? null : outcome.errorText,
      httpStatus: httpStatusFor(status, errorCode),
      outputRedacted: outcome.status === 'succeeded' ? redactOutput(outcome.result) : null,
      retryCount: outcome.retries.length, retryAfterSeconds, vendorStatus: outcome.vendorStatus, durationMs: outcome.durationMs,
      costCents: vendorReached ? c.tool.costCents : 0,
      truncated: json !== null && Buffer.byteLength(json) > this.config.RESULT_BUDGET_BYTES,
      result: json !== null ? this.results.seal(c.orgId, c.id, json, now) : undefined,
      dropInput: c.dropInput,
    };
    const settled = (): void => {
      this.count(c.tool.toolName, c.tool.action, status, errorCode);
      settledCalls.emit('settled', c.id);
    };
    let written: boolean;
    try {
      written = await this.ledger.writeOutcomeDurably(row, events, (late) => late && settled());
    } catch (err) {
      if (!(err instanceof OutcomeNotWritten)) throw err;
      // Not "nothing was executed": the caller must not send this call again under a new id. "May not be":
      // a connection lost mid-write may have committed it.
      const what = vendorReached
        ? 'the vendor was called, but the database is unavailable and its outcome may not be recorded yet'
        : 'the database is unavailable and the outcome of this call (the vendor was not called) may not be recorded yet';
      const then = err.kept
        ? 'the gateway keeps it and retries. Send the same tool_use again (same id or Idempotency-Key) later to read it'
        : 'the gateway is stopping, so it becomes indeterminate unless it was. Send the same tool_use again (same id or Idempotency-Key) later to read it';
      throw new AppError('DATABASE_UNAVAILABLE', `${what}; ${then}${vendorReached ? ', never under a new id: that would call the vendor again' : ''}`, {
        retryAfterSeconds: 1,
        fields: { toolCallId: c.id, outcomeConfirmed: false },
      });
    }
    if (!written) {
      // Someone else settled it (e.g. the orphan sweep): answer with what the ledger says.
      this.log.warn({ toolCallId: c.id }, 'outcome not recorded: the call was settled elsewhere');
      const stored = await this.findById(c.orgId, c.id);
      return this.answerStored(stored!, c.toolUseId, false);
    }
    settled();
    const facts = { id: c.id, status, errorCode, errorText: null, retryAfterSeconds, vendorStatus: outcome.status === 'succeeded' ? null : outcome.vendorStatus };
    const result: StoredResult = outcome.status === 'succeeded' && json !== null ? { found: true, value: outcome.result, json } : { found: false };
    return this.respond(buildToolCallBody(facts, result, c.toolUseId, false, this.config.RESULT_BUDGET_BYTES), httpStatusFor(status, errorCode), false);
  }

  async findById(orgId: string, id: string): Promise<StoredCall | undefined> {
    const [row] = await this.sql.query<StoredCall>(`SELECT ${STORED_CALL_COLUMNS} FROM tool_calls t WHERE t.id = $1 AND t.org_id = $2`, [id, orgId]);
    return row;
  }

  /**
   * The row as it stands now: a call waiting for an approval past its expiry is settled first (blocked /
   * APPROVAL_EXPIRED, see RunsService.expireOverdueApprovals) rather than answered waiting_approval — "do not
   * send it again, it will be decided" — for an approval nobody can decide any more. No statement for any
   * other call: the expiry comes with the row (STORED_CALL_COLUMNS).
   */
  async expireIfOverdue(row: StoredCall): Promise<StoredCall> {
    if (row.status !== 'waiting_approval' || row.approval_expires_at === null || row.approval_expires_at.getTime() > this.clock.nowMs()) return row;
    const settled = await this.runs.expireOverdueApprovals({ toolCallId: row.id }, this.clock.now());
    if (settled.includes(row.id)) settledCalls.emit('settled', row.id);
    // Settled here or by someone else meanwhile (the sweep, a decision, the run's end): the row as they left it.
    return (await this.findById(row.org_id, row.id)) ?? row;
  }

  /**
   * The answer for a tool_use that already has a ledger row (its replay, or 409 while it executes), without
   * ever starting it: for the items of a batch after one still executing (writes run one at a time, in order).
   * A tool_use with no row yet is answered with `notStarted` (by default 409 IDEMPOTENCY_IN_PROGRESS, naming the
   * batch): nothing was started.
   */
  async replayOnly(p: Principal, runId: string, body: unknown, notStarted: () => AppError = heldBehindEarlierItem): Promise<ToolCallResponse> {
    const { orgId, use, idempotencyKey, digest } = await this.identify(p, runId, body, undefined);
    return this.replayByKey(orgId, idempotencyKey, digest, use.id, notStarted);
  }

  /**
   * Who asks, for which run, what (its one spelling of the params), under which idempotency key and digest: what
   * every answer to a tool_use starts from, a new call or a replay.
   */
  private async identify(p: Principal, runId: string, body: unknown, idempotencyHeader: unknown) {
    // Agent or org admin keys (API.md §1); a platform key has no org to act in. Before the body: the key, not the request, is wrong.
    if (!p.orgId) throw new AppError('FORBIDDEN', PLATFORM_KEY_REFUSED);
    const orgId = p.orgId;
    const parsed = parseToolUse(body);
    // From here on, one spelling of the params: the policy judges what the vendor will act on.
    const use = { ...parsed, params: this.catalog.canonicalParams(parsed.name, parsed.action, parsed.params) };
    const run = await this.runs.snapshot(orgId, runId);
    const idempotencyKey = idempotencyKeyFor(idempotencyHeader, run.id, use.id);
    const digest = actionDigest({ toolName: use.name, action: (use.action ?? null) as string, params: use.params });
    return { orgId, use, run, idempotencyKey, digest };
  }

  /**
   * The body for a stored call, with its full result while it is kept.
   * `budgetBytes` bounds the model-facing content: the result budget for
   * replays, unbounded for GET …/result (which exists to hand out everything).
   */
  async answerStored(row: StoredCall, toolUseId: string, replayed: boolean, budgetBytes = this.config.RESULT_BUDGET_BYTES): Promise<ToolCallResponse> {
    const result = row.status === 'succeeded' ? await this.results.load(row.org_id, row.id, this.clock.now()) : ({ found: false } as const);
    const facts = {
      id: row.id, status: row.status, errorCode: row.error_code, errorText: row.error_code === 'INVALID_INPUT' || row.error_code === 'NOT_IN_MANIFEST' ? row.error_text : null,
      retryAfterSeconds: row.retry_after_seconds, approvalKind: row.approval_kind, reconciled: row.reconciled === true, vendorStatus: row.vendor_status,
    };
    return this.respond(buildToolCallBody(facts, result, toolUseId, replayed, budgetBytes), row.http_status, replayed);
  }

  /**
   * The replay of the call stored under the key, or `none()` when there is none: the run ended (409
   * RUN_NOT_ACTIVE), a batch item not started, or (after a key conflict) a bug.
   */
  private async replayByKey(orgId: string, idempotencyKey: string, digest: string, toolUseId: string, none: () => Error): Promise<ToolCallResponse> {
    const row = await this.storedByKey(orgId, idempotencyKey);
    if (!row) throw none();
    return this.replayStored(row, digest, toolUseId);
  }

  private async storedByKey(orgId: string, idempotencyKey: string): Promise<StoredCall | undefined> {
    const [row] = await this.sql.prepared<StoredCall>(`SELECT ${STORED_CALL_COLUMNS} FROM tool_calls t WHERE t.org_id = $1 AND t.idempotency_key = $2`, [orgId, idempotencyKey]);
    return row;
  }

  private async replayStored(stored: StoredCall, digest: string, toolUseId: string): Promise<ToolCallResponse> {
    if (stored.action_digest !== digest) {
      throw new AppError('IDEMPOTENCY_KEY_REUSED', 'this Idempotency-Key was already used for a different action');
    }
    const row = await this.expireIfOverdue(stored);
    if (row.status === 'running' || row.status === 'approved' || row.status === 'requested') {
      throw new AppError('IDEMPOTENCY_IN_PROGRESS', 'a call with this idempotency key is still executing', { retryAfterSeconds: 1 });
    }
    return this.answerStored(row, toolUseId, true);
  }

  /** 409 RUN_NOT_ACTIVE for a run found ended, which this replica stops caching. */
  private runEnded(runId: string): AppError {
    this.runs.forget(runId);
    return new AppError('RUN_NOT_ACTIVE', 'run is not active: it was completed or cancelled');
  }

  /**
   * The org × vendor lease is full. A duplicate of an existing call still gets
   * its replay; a new call gets 429 and keeps its idempotency key unused, with
   * an event so the refusal is on the record, with the key that was refused
   * (no row or other event of the call names it).
   */
  private async concurrencyLimited(
    orgId: string,
    actor: { keyId: string; role: string },
    runId: string,
    idempotencyKey: string,
    digest: string,
    toolUseId: string,
    entry: CatalogEntry,
  ): Promise<ToolCallResponse> {
    await this.intentsInFlight.get(`${orgId}:${idempotencyKey}`);
    const [{ exists, live }] = await this.sql.query<{ exists: boolean; live: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM tool_calls WHERE org_id = $1 AND idempotency_key = $2) AS exists,
              EXISTS (SELECT 1 FROM agent_runs WHERE id = $3 AND status IN ('running', 'waiting_approval')) AS live`,
      [orgId, idempotencyKey, runId],
    );
    if (exists) return this.replayByKey(orgId, idempotencyKey, digest, toolUseId, conflictWithoutRow);
    // A run that ended (on another replica, since this one cached it) takes no call, now or later: not "retry shortly".
    if (!live) throw this.runEnded(runId);
    await this.events.append([{ orgId, type: 'tool_call.rejected', runId, actor, metadata: { toolName: entry.tool.name, action: entry.action.name, digest, errorCode: 'CONCURRENCY_LIMIT', vendor: entry.vendor } }]);
    this.count(entry.tool.name, entry.action.name, 'rejected', 'CONCURRENCY_LIMIT');
    throw new AppError('CONCURRENCY_LIMIT', `too many ${entry.vendor} calls in flight for this org; retry shortly`, { retryAfterSeconds: 1 });
  }

  private trackIntent(key: string, intent: Promise<unknown>): void {
    const settled: Promise<void> = intent.then(
      () => undefined,
      () => undefined,
    );
    this.intentsInFlight.set(key, settled);
    void settled.then(() => {
      if (this.intentsInFlight.get(key) === settled) this.intentsInFlight.delete(key);
    });
  }

  private respond(body: ToolCallBody, httpStatus: number, replayed: boolean): ToolCallResponse {
    return { httpStatus, body, headers: replayed ? { 'Idempotent-Replayed': 'true' } : {} };
  }

  private count(tool: string, action: string, status: string, errorCode: string | null): void {
    // Label values are bounded: catalog names only (unknown tools collapse to "unknown").
    const known = this.catalog.find(tool, action);
    this.metrics.toolCalls.inc({ tool: known ? tool : 'unknown', action: known ? action : 'unknown', status, error_code: errorCode ?? 'none' });
  }
}
