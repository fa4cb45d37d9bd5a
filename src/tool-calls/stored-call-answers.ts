import { Inject, Injectable } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { KeyRateLimiter } from '../auth/key-rate-limiter.js';
import { reachesRun, type RunReacher } from '../auth/principal.js';
import { AppError } from '../common/errors/app-error.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { Sql } from '../db/sql.js';
import { RunsService } from '../runs/runs.service.js';
import { ResultsStore } from './results.store.js';
import { remainingWait, STORED_CALL_COLUMNS, type StoredCall } from './stored-call.js';
import { buildToolCallBody } from './tool-call-body.js';
import { respond, type ToolCallResponse } from './tool-call-response.js';

/** A call recorded under the key or the tool_use id of this request, for another action. */
/** The collision named: the Idempotency-Key, or the tool_use id in its run (which one matched the stored call). */
const KEY_REUSED = 'this Idempotency-Key was already used for a different action: a key names one call (send a new call under a new key, or none)';
const TOOL_USE_REUSED =
  'this tool_use id was already used in this run for a different action: a tool_use id names one call of its run (a new call needs its own id)';
const KEY_OTHER_RUN = 'this Idempotency-Key was already used for a call of another run (toolCallId); a key names one call of one run: nothing was run';

/**
 * A request's action digest: `keyed`, under its org's digest key (what is stored and shown), and `unkeyed`, the plain
 * SHA-256 calls were recorded under before digests were keyed, computed only when a stored digest is not `keyed`.
 */
export interface CallDigest {
  keyed: string;
  unkeyed: () => string;
}

/**
 * Whether a stored call's digest is this request's action: its keyed digest, or the unkeyed one of a call recorded
 * before the upgrade (a resend of it is the same call, replayed, not 422 IDEMPOTENCY_KEY_REUSED).
 */
function sameAction(stored: string, digest: CallDigest): boolean {
  return stored === digest.keyed || stored === digest.unkeyed();
}

/** The key conflicted on insert, yet no row holds it: cannot happen (the row is never deleted). */
export function conflictWithoutRow(): Error {
  return new Error('idempotency key conflict without a row');
}

/** A call's answer from its ledger row: read by id or idempotency key, replayed, settled first if its approval expired. */
@Injectable()
export class StoredCallAnswers {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly runs: RunsService,
    private readonly results: ResultsStore,
    private readonly clock: Clock,
    private readonly sql: Sql,
    private readonly limiter: KeyRateLimiter,
  ) {}

  async findById(orgId: string, id: string): Promise<StoredCall | undefined> {
    const [row] = await this.sql.query<StoredCall>(`SELECT ${STORED_CALL_COLUMNS} FROM tool_calls t WHERE t.id = $1 AND t.org_id = $2`, [id, orgId]);
    return row;
  }

  /**
   * The row as it stands now: a call waiting for an approval past its expiry is settled first (blocked /
   * APPROVAL_EXPIRED, see RunsService.expireOverdueApprovals) rather than answered waiting_approval — "do not
   * send it again, it will be decided" — for an approval nobody can decide any more. No statement for any
   * other call: the expiry comes with the row (STORED_CALL_COLUMNS). An approval another session holds (a decision
   * in flight, the sweep's batch) is not waited for (RunsService.expireOverdueApprovals skips it): the row is answered
   * as it stands, and the holder or the sweep settles it — a replay or GET …/result never waits on that lock.
   */
  async expireIfOverdue(row: StoredCall): Promise<StoredCall> {
    if (row.status !== 'waiting_approval' || row.approval_expires_at === null || row.approval_expires_at.getTime() > this.clock.nowMs()) return row;
    await this.runs.expireOverdueApprovals({ toolCallId: row.id }, this.clock.now()); // waking the long-polls on it (ApprovalExpiries)
    // Settled here or by someone else meanwhile (the sweep, a decision, the run's end): the row as they left it.
    return (await this.findById(row.org_id, row.id)) ?? row;
  }

  /**
   * The body for a stored call, with its full result while it is kept. The model-facing content is cut to the
   * result budget; `wholeResult` (GET …/result) keeps `result` whole all the same (see buildToolCallBody).
   */
  async answerStored(row: StoredCall, toolUseId: string, replayed: boolean, wholeResult = false): Promise<ToolCallResponse> {
    const result = row.status === 'succeeded' ? await this.results.load(row.org_id, row.id, this.clock.now()) : ({ found: false } as const);
    const facts = {
      id: row.id, status: row.status, errorCode: row.error_code, errorText: row.error_code === 'INVALID_INPUT' || row.error_code === 'NOT_IN_MANIFEST' ? row.error_text : null,
      retryAfterSeconds: remainingWait(row.retry_after_seconds, row.finished_at, this.clock.nowMs()), approvalKind: row.approval_kind, rejectionReason: row.rejection_reason, reconciled: row.reconciled === true, vendorStatus: row.vendor_status,
      vendorRefused: row.vendor_refused,
    };
    return respond(buildToolCallBody(facts, result, toolUseId, replayed, this.config.RESULT_BUDGET_BYTES, wholeResult), row.http_status, replayed);
  }

  /**
   * The replay of the call stored under the key, or `none()` when there is none: the run ended (409
   * RUN_NOT_ACTIVE), a batch item not started, or (after a key conflict) a bug.
   */
  async replayByKey(
    who: RunReacher & { orgId: string; batchItem?: boolean },
    call: { runId: string; idempotencyKey: string },
    digest: CallDigest,
    toolUseId: string,
    none: () => Error,
  ): Promise<ToolCallResponse> {
    const found = await this.storedCall(who.orgId, call.idempotencyKey, call.runId, toolUseId);
    if (!found) throw none();
    const { run_created_by: runCreatedBy, ...row } = found;
    // An Idempotency-Key is unique per org, so one an agent key sends may name a call of another key's run: that call
    // is never replayed to it (its result is the other key's, reachesRun). The key is taken all the same: 422, as for
    // a key used for another action, and nothing runs.
    if (!reachesRun(who, { orgId: row.org_id, createdBy: runCreatedBy })) {
      throw Object.assign(new AppError('IDEMPOTENCY_KEY_REUSED', KEY_REUSED), {
        storedCall: { status: row.status, toolName: row.tool_name, action: row.action },
      });
    }
    // A key names one call of one run: the same key sent for another run is not a resend of it. Replayed there, a run
    // whose manifest lacks the tool was handed the other run's result, and nothing on its own ledger said so. Nothing
    // runs; the call is named, for its result to be read where its run is reachable (GET /v1/tool-calls/:id/result).
    if (row.run_id !== call.runId) {
      throw Object.assign(new AppError('IDEMPOTENCY_KEY_REUSED', KEY_OTHER_RUN, { fields: { toolCallId: row.id } }), {
        storedCall: { status: row.status, toolName: row.tool_name, action: row.action },
      });
    }
    return this.replayStored(row, digest, toolUseId, who.keyId, who.batchItem === true);
  }

  /**
   * The call this request names, by the first of: the call under this idempotency key recorded for this very run and
   * tool_use id (every replay without a header, and a call recorded twice under two keys before the tool_use id was
   * unique: each key still gets its own); the call recorded for this tool_use id in this run (sent before under
   * another key, or under one and now without); the call under this key (the same key with another tool_use id). The
   * tool_use id before a key naming something else: it is the model's own name for the call, which the answer is given
   * under, so a key naming another call of the run (a runtime that lost track of the keys it chose) never hands this
   * tool_use that call's outcome. Each branch is one index probe.
   */
  private async storedCall(orgId: string, idempotencyKey: string, runId: string, toolUseId: string): Promise<(StoredCall & { run_created_by: string | null }) | undefined> {
    const [row] = await this.sql.prepared<StoredCall & { run_created_by: string | null }>(
      `SELECT ${STORED_CALL_COLUMNS}, (SELECT r.created_by FROM agent_runs r WHERE r.id = t.run_id) AS run_created_by
         FROM (SELECT c.*, 1 AS pick FROM tool_calls c WHERE org_id = $1 AND idempotency_key = $2 AND run_id = $3 AND tool_use_id = $4
               UNION ALL
               SELECT c.*, 2 FROM tool_calls c WHERE run_id = $3 AND tool_use_id = $4 AND tool_use_unique AND org_id = $1
               UNION ALL
               SELECT c.*, 3 FROM tool_calls c WHERE org_id = $1 AND idempotency_key = $2) t
        ORDER BY t.pick LIMIT 1`,
      [orgId, idempotencyKey, runId, toolUseId],
    );
    return row;
  }

  private async replayStored(stored: StoredCall, digest: CallDigest, toolUseId: string, keyId: string, batchItem: boolean): Promise<ToolCallResponse> {
    if (!sameAction(stored.action_digest, digest)) {
      // The stored call rides along (its status and what it does), never serialized: a batch holds the writes after
      // this one while the call first sent under the key, if a write, has not run yet (ToolCallBatchService, keyReusedHold).
      // Found by this tool_use id in this run, or else by the key alone (StoredCallAnswers.storedCall).
      const reused = stored.tool_use_id === toolUseId ? TOOL_USE_REUSED : KEY_REUSED;
      throw Object.assign(new AppError('IDEMPOTENCY_KEY_REUSED', reused), {
        storedCall: { status: stored.status, toolName: stored.tool_name, action: stored.action },
      });
    }
    const row = await this.expireIfOverdue(stored);
    if (row.status === 'running' || row.status === 'approved' || row.status === 'requested') {
      // The call is named (as for KEY_OTHER_RUN), so the agent can wait for it (GET /v1/tool-calls/:id/result) and ops find it.
      throw new AppError('IDEMPOTENCY_IN_PROGRESS', 'a call with this idempotency key is still executing (toolCallId)', { retryAfterSeconds: 1, fields: { toolCallId: row.id } });
    }
    // The model gets at most the result budget, but the whole stored result is read and decrypted: charged by its size
    // as a full read is (GET …/result), before it is decrypted (KeyRateLimiter.chargeReplay).
    if (row.status === 'succeeded') this.limiter.chargeReplay(keyId, row.result_bytes, batchItem);
    return this.answerStored(row, toolUseId, true);
  }

  /**
   * 401 for a key revoked since the request was authenticated. Tool-call posts skip the fresh key lookup because
   * the intent statement re-checks the key (KeyCheckedInWrite); a path that answers without reaching it (a replay
   * for an ended run, a refusal for a full vendor slot) checks here, before it records or hands out anything.
   */
  async assertKeyLive(keyId: string): Promise<void> {
    const [row] = await this.sql.query<{ live: boolean }>('SELECT EXISTS (SELECT 1 FROM api_keys WHERE id = $1 AND revoked_at IS NULL) AS live', [keyId]);
    if (!row?.live) throw new AppError('UNAUTHENTICATED', 'a valid API key is required');
  }

  /** 409 RUN_NOT_ACTIVE for a run found ended, which this replica stops caching. */
  runEnded(runId: string): AppError {
    this.runs.forget(runId);
    return new AppError('RUN_NOT_ACTIVE', 'run is not active: it was completed or cancelled');
  }
}
