import { Inject, Injectable } from '@nestjs/common';
import { ToolCatalogService, type CatalogEntry } from '../catalog/tool-catalog.service.js';
import { AppError } from '../common/errors/app-error.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { Sql } from '../db/sql.js';
import { ConcurrencyLeases } from '../executor/concurrency-lease.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { countToolCall } from './count-tool-call.js';
import { conflictWithoutRow, StoredCallAnswers, type CallDigest } from './stored-call-answers.js';
import type { ToolCallResponse } from './tool-call-response.js';

/** The org × vendor concurrency limit: its leases, and the answer to a call that finds it full. */
@Injectable()
export class VendorAdmission {
  private readonly leases: ConcurrencyLeases;
  /**
   * Intent writes of lease holders in flight, by org + idempotency key. A
   * duplicate that finds the lease full waits for its twin's intent before
   * deciding, so it replays (409 in progress) instead of being refused 429
   * only because the twin's row was not committed yet.
   */
  private readonly intentsInFlight = new Map<string, Promise<void>>();

  constructor(
    @Inject(APP_CONFIG) config: AppConfig,
    private readonly answers: StoredCallAnswers,
    private readonly catalog: ToolCatalogService,
    private readonly events: LedgerEventsService,
    private readonly metrics: MetricsService,
    private readonly sql: Sql,
  ) {
    this.leases = new ConcurrencyLeases(config.VENDOR_CONCURRENCY_LIMIT);
  }

  /**
   * A slot of the org × vendor concurrency limit (VENDOR_CONCURRENCY_LIMIT), or
   * null when it is full; the caller gives it back once the vendor has answered.
   * Approved calls take one too, so approving many at once cannot exceed it.
   */
  leaseFor(orgId: string, vendor: string, approvedCall?: string): (() => void) | null {
    return this.leases.acquire(`${orgId}:${vendor}`, approvedCall);
  }

  /** Approved call `toolCallId` found the org × vendor full: the next free slot is kept for it for up to `forMs` (ConcurrencyLeases.reserve). */
  reserveFor(orgId: string, vendor: string, forMs: number, toolCallId: string, wake?: () => void): void {
    this.leases.reserve(`${orgId}:${vendor}`, forMs, toolCallId, wake);
  }

  /** `toolCallId` no longer waits for a slot (ConcurrencyLeases.unreserve). */
  unreserve(toolCallId: string): void {
    this.leases.unreserve(toolCallId);
  }

  /** The approved calls slots are kept for in this process. */
  reservationHolders(): string[] {
    return this.leases.reservationHolders();
  }

  /**
   * The org × vendor lease is full. A duplicate of an existing call still gets
   * its replay; a new call gets 429 and keeps its idempotency key unused, with
   * an event so the refusal is on the record, with the key that was refused
   * (no row or other event of the call names it).
   */
  async concurrencyLimited(
    orgId: string,
    actor: { keyId: string; role: string },
    runId: string,
    idempotencyKey: string,
    digest: CallDigest,
    toolUseId: string,
    entry: CatalogEntry,
    batchItem = false,
  ): Promise<ToolCallResponse> {
    // A twin in flight, under this key or with this tool_use id in this run: its intent decides replay or refusal.
    await Promise.all([this.intentsInFlight.get(`${orgId}:${idempotencyKey}`), this.intentsInFlight.get(`${runId}:${toolUseId}`)]);
    // The intent statement, which re-checks the key, is not reached on this path: a key revoked since the request
    // was authenticated gets neither a replay nor an event naming it (KeyCheckedInWrite).
    await this.answers.assertKeyLive(actor.keyId);
    // Recorded already (under this key, or this tool_use id in this run): its replay, not a refusal.
    const [{ exists, live }] = await this.sql.query<{ exists: boolean; live: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM tool_calls WHERE org_id = $1 AND idempotency_key = $2)
              OR EXISTS (SELECT 1 FROM tool_calls WHERE run_id = $3 AND tool_use_id = $4 AND tool_use_unique) AS exists,
              EXISTS (SELECT 1 FROM agent_runs WHERE id = $3 AND status IN ('running', 'waiting_approval')) AS live`,
      [orgId, idempotencyKey, runId, toolUseId],
    );
    if (exists) return this.answers.replayByKey({ orgId, keyId: actor.keyId, role: actor.role, batchItem }, { runId, idempotencyKey }, digest, toolUseId, conflictWithoutRow);
    // A run that ended (on another replica, since this one cached it) takes no call, now or later: not "retry shortly".
    if (!live) throw this.answers.runEnded(runId);
    await this.events.append([{ orgId, type: 'tool_call.rejected', runId, actor, metadata: { toolName: entry.tool.name, action: entry.action.name, digest: digest.keyed, errorCode: 'CONCURRENCY_LIMIT', vendor: entry.vendor } }]);
    countToolCall(this.catalog, this.metrics, entry.tool.name, entry.action.name, 'rejected', 'CONCURRENCY_LIMIT');
    throw new AppError('CONCURRENCY_LIMIT', `too many ${entry.vendor} calls in flight for this org; retry shortly`, { retryAfterSeconds: 1 });
  }

  /** `keys`: the org and idempotency key, and the run and tool_use id, the intent may be found by. */
  trackIntent(keys: string[], intent: Promise<unknown>): void {
    const settled: Promise<void> = intent.then(
      () => undefined,
      () => undefined,
    );
    for (const key of keys) this.intentsInFlight.set(key, settled);
    void settled.then(() => {
      for (const key of keys) if (this.intentsInFlight.get(key) === settled) this.intentsInFlight.delete(key);
    });
  }
}
