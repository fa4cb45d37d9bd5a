import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { ToolCatalogService } from '../catalog/tool-catalog.service.js';
import { Clock } from '../common/clock.js';
import { PeriodicTask } from '../common/periodic-task.js';
import { EnvelopeCipher } from '../common/crypto/envelope-cipher.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { Sql } from '../db/sql.js';
import type { ExecutionOutcome } from '../executor/execution-outcome.js';
import { RuntimeToolExecutor } from '../executor/runtime-tool-executor.js';
import { httpStatusFor } from '../tool-calls/tool-call-body.js';
import { inputAad, recordedTool, settledCalls, ToolCallsService } from '../tool-calls/tool-calls.service.js';
import { settleApprovalsSql } from './approval-settle.sql.js';

const SWEEP_EVERY_MS = 5_000;

interface ClaimedCall {
  id: string;
  org_id: string;
  run_id: string;
  tool_name: string;
  action: string;
  action_digest: string;
  idempotency_key: string;
  tool_use_id: string;
}

/**
 * Runs approved calls exactly once and expires stale approvals.
 * "Exactly once" rests on one conditional update (approved → running) that
 * only one caller — the approver's request, a sweep, another replica — can
 * win. A sweep at start-up and every few seconds picks up calls approved
 * before a crash, and expires approvals whose time has passed.
 */
@Injectable()
export class ApprovedCallRunner implements OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly log = new Logger('ApprovedCalls');
  private readonly task = new PeriodicTask('approvals sweep', SWEEP_EVERY_MS, () => this.tick(), this.log);
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Calls this process is claiming or running: a sweep does not start them a second time (nor lease a second slot). */
  private readonly running = new Set<string>();
  /** Set when shutdown begins: no new vendor call starts from here. */
  private stopping = false;

  constructor(
    private readonly sql: Sql,
    private readonly catalog: ToolCatalogService,
    private readonly executor: RuntimeToolExecutor,
    private readonly calls: ToolCallsService,
    private readonly cipher: EnvelopeCipher,
    private readonly clock: Clock,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.sweep().catch((err: unknown) => this.log.warn(`start-up sweep failed: ${err instanceof Error ? err.message : String(err)}`));
    this.task.start();
  }

  /**
   * Before the HTTP drain: a draining gateway must not start new vendor calls
   * (a refund approved on another replica included) that a SIGKILL at the end
   * of the grace period could cut off; the other replicas' sweeps run them.
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true; // an approval decided during the drain stays approved: another replica, or the restart, runs it
    await this.task.stop();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.task.stop();
    await Promise.allSettled([...this.inFlight]); // the calls already started record their outcomes before the database closes
  }

  /** Expires overdue approvals, then starts every approved call nobody has started, and waits for those runs. */
  async sweep(): Promise<{ expired: number; started: number }> {
    const { expired, runs } = await this.startSweep();
    await Promise.all(runs);
    return { expired, started: runs.length };
  }

  /**
   * The periodic pass: like sweep() but it does not wait for the calls it
   * started, so a slow vendor never holds back the next pass's expiries (a
   * call past its approval's expiry must not keep showing waiting_approval).
   */
  async tick(): Promise<{ expired: number; started: number }> {
    const { expired, runs } = await this.startSweep();
    return { expired, started: runs.length };
  }

  private async startSweep(): Promise<{ expired: number; runs: Promise<void>[] }> {
    const expired = await this.sql.query(settleApprovalsSql('expired'), [null, 'expired', this.clock.now(), null, null, null]);
    // Fair across orgs: each org × vendor's oldest calls first, in turns, and no more of one org × vendor
    // than its concurrency limit lets run at once — one org's backlog of approved calls neither fills the
    // page nor holds back another org's call until it has drained.
    const approved = await this.sql.query<{ id: string }>(
      `SELECT id FROM (
         SELECT id, updated_at, row_number() OVER (PARTITION BY org_id, vendor ORDER BY updated_at, id) AS turn
           FROM tool_calls WHERE status = 'approved' AND NOT (id = ANY($1::uuid[]))) q
        WHERE turn <= $2
        ORDER BY turn, updated_at, id LIMIT 100`,
      [[...this.running], this.config.VENDOR_CONCURRENCY_LIMIT],
    );
    return { expired: expired.length, runs: approved.map((r) => this.runSoon(r.id)) };
  }

  /** Fire-and-forget from a decision or a sweep; errors are logged, and a later sweep retries anything left approved. */
  runSoon(toolCallId: string): Promise<void> {
    if (this.stopping) {
      this.log.log({ toolCallId }, 'approved call not started: the gateway is stopping; a sweep (another replica, or after the restart) runs it');
      return Promise.resolve();
    }
    const p = this.run(toolCallId).catch((err: unknown) => this.log.error({ toolCallId, err: err instanceof Error ? err.message : String(err) }, 'approved call failed to run'));
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
    return p;
  }

  /**
   * Claims (approved → running) and executes one call; a no-op if someone else
   * claimed it. Approval does not bypass the gates an approval cannot speak
   * for: the call takes a slot of the org × vendor concurrency limit (when
   * they are all taken it stays approved and a later sweep runs it), and the
   * org's `tool_calling_enabled` flag is re-read in the claim itself — turned
   * off since the call was submitted, the call ends approved → blocked
   * FEATURE_DISABLED and nothing reaches the vendor (the kill switch holds).
   */
  async run(toolCallId: string): Promise<void> {
    if (this.running.has(toolCallId)) return; // this process has it already
    this.running.add(toolCallId);
    try {
      await this.runOnce(toolCallId);
    } finally {
      this.running.delete(toolCallId);
    }
  }

  private async runOnce(toolCallId: string): Promise<void> {
    const [pending] = await this.sql.query<{ org_id: string; tool_name: string; action: string }>(
      `SELECT org_id, tool_name, action FROM tool_calls WHERE id = $1 AND status = 'approved'`,
      [toolCallId],
    );
    if (!pending) return;
    const vendor = this.catalog.find(pending.tool_name, pending.action)?.vendor;
    const release = vendor ? this.calls.leaseFor(pending.org_id, vendor) : () => undefined;
    if (!release) {
      this.log.log({ toolCallId }, 'approved call deferred: the org × vendor concurrency limit is reached; the sweep runs it');
      return;
    }
    try {
      await this.claimAndExecute(toolCallId, release);
    } finally {
      release();
    }
  }

  private async claimAndExecute(toolCallId: string, release: () => void): Promise<void> {
    const [call] = await this.sql.query<ClaimedCall & { status: 'running' | 'blocked' }>(
      `WITH f AS (
         SELECT COALESCE((SELECT ff.enabled FROM feature_flags ff
                           WHERE ff.org_id = t.org_id AND ff.flag = 'tool_calling_enabled'), false) AS enabled
           FROM tool_calls t WHERE t.id = $1),
       tc AS (
         UPDATE tool_calls SET
           status = CASE WHEN f.enabled THEN 'running' ELSE 'blocked' END,
           error_code = CASE WHEN f.enabled THEN NULL ELSE 'FEATURE_DISABLED' END,
           http_status = CASE WHEN f.enabled THEN 200 ELSE $2 END,
           started_at = CASE WHEN f.enabled THEN now() END,
           finished_at = CASE WHEN f.enabled THEN NULL ELSE now() END,
           updated_at = now()
          FROM f WHERE id = $1 AND status = 'approved'
          RETURNING id, org_id, run_id, tool_name, action, action_digest, idempotency_key, tool_use_id, status),
       ti AS (DELETE FROM tool_call_inputs i USING tc WHERE i.tool_call_id = tc.id AND tc.status = 'blocked'),
       ev AS (
         INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, metadata)
         SELECT gen_random_uuid(), org_id, CASE status WHEN 'running' THEN 'tool_call.started' ELSE 'tool_call.blocked' END, run_id, id,
                jsonb_build_object('toolName', tool_name, 'action', action, 'digest', action_digest, 'afterApproval', true)
                  || CASE status WHEN 'running' THEN '{}'::jsonb ELSE '{"errorCode": "FEATURE_DISABLED", "reason": "feature_disabled"}'::jsonb END
           FROM tc)
       SELECT * FROM tc`,
      [toolCallId, httpStatusFor('blocked', 'FEATURE_DISABLED')],
    );
    if (!call) return;
    if (call.status === 'blocked') {
      this.log.warn({ toolCallId }, 'approved call blocked: tool calling was turned off for the org after it was submitted');
      settledCalls.emit('settled', call.id);
      return;
    }
    const entry = this.catalog.find(call.tool_name, call.action);
    const base = { id: call.id, orgId: call.org_id, runId: call.run_id, toolUseId: call.tool_use_id, digest: call.action_digest, from: 'running' as const };
    let outcome: ExecutionOutcome;
    const params = await this.loadInput(call);
    if (!entry || !params) {
      // Recorded like any outcome (terminal event, settled, raw input deleted below), though nothing was sent.
      if (!entry) this.log.error({ toolCallId }, 'approved call refers to an action no longer in the catalog');
      const errorText = entry ? 'the approved input is no longer available' : 'the approved action is no longer in the catalog';
      outcome = { status: 'failed', errorCode: 'EXECUTION_ERROR', errorText, vendorStatus: null, retries: [], durationMs: 0, vendorReached: false };
    } else {
      outcome = await this.executor.execute({ entry, orgId: call.org_id, toolCallId: call.id, idempotencyKey: call.idempotency_key, params });
      release(); // the lease counts calls at the vendor: give it back before the outcome commit
    }
    // Not executed: the names the call was recorded with, and no cost (nothing reached a vendor).
    const tool = entry && params ? recordedTool(entry) : { toolName: call.tool_name, action: call.action, costCents: 0 };
    // The approved input goes in the outcome's own statement (also when that is written late, after an
    // outage); a call settled elsewhere meanwhile was settled by the orphan sweep, which deletes it too.
    await this.calls.recordOutcome({ ...base, tool, dropInput: true }, outcome);
  }

  private async loadInput(call: ClaimedCall): Promise<Record<string, unknown> | null> {
    const [row] = await this.sql.query<{ key_id: string; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer }>(
      'SELECT key_id, iv, ciphertext, auth_tag FROM tool_call_inputs WHERE tool_call_id = $1 AND org_id = $2',
      [call.id, call.org_id],
    );
    if (!row) return null;
    try {
      return this.cipher.decryptJson<Record<string, unknown>>({ keyId: row.key_id, iv: row.iv, ciphertext: row.ciphertext, authTag: row.auth_tag }, inputAad(call.org_id, call.id));
    } catch {
      return null;
    }
  }
}
