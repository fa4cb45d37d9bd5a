import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { ToolCatalogService, type CatalogEntry } from '../catalog/tool-catalog.service.js';
import { Clock } from '../common/clock.js';
import { isDatabaseUnavailable } from '../common/errors/database-errors.js';
import { PeriodicTask } from '../common/periodic-task.js';
import { EnvelopeCipher } from '../common/crypto/envelope-cipher.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { Sql } from '../db/sql.js';
import type { ExecutionOutcome } from '../executor/execution-outcome.js';
import { RuntimeToolExecutor } from '../executor/runtime-tool-executor.js';
import { retryWhileUnavailable } from '../tool-calls/outcome-retry.js';
import { httpStatusFor } from '../tool-calls/tool-call-body.js';
import { inputAad, recordedTool, settledCalls, ToolCallsService, type RecordedTool } from '../tool-calls/tool-calls.service.js';
import { CLAIM_APPROVED_CALL_SQL } from './approved-call-claim.sql.js';
import { settleApprovalsSql } from './approval-settle.sql.js';

const SWEEP_EVERY_MS = 5_000;

/** A claimed call as the claim returns it, with its encrypted approved input (absent once blocked or deleted). */
interface ClaimedCall {
  id: string;
  org_id: string;
  run_id: string;
  tool_name: string;
  action: string;
  action_digest: string;
  idempotency_key: string;
  tool_use_id: string;
  status: 'running' | 'blocked';
  key_id: string | null;
  iv: Buffer | null;
  ciphertext: Buffer | null;
  auth_tag: Buffer | null;
}

interface Ready {
  entry: CatalogEntry;
  params: Record<string, unknown>;
  tool: RecordedTool;
}

interface NotExecuted {
  notExecuted: string;
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
  /** Aborted when the database is about to close: a claim stops waiting for it to come back. */
  private readonly closing = new AbortController();

  constructor(
    private readonly sql: Sql,
    private readonly catalog: ToolCatalogService,
    private readonly executor: RuntimeToolExecutor,
    private readonly calls: ToolCallsService,
    private readonly cipher: EnvelopeCipher,
    private readonly clock: Clock,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /**
   * The start-up pass starts the approved calls left by a previous process without waiting for them
   * (as the periodic pass does): start-up, and so /healthz and every route, must not wait for a slow
   * vendor. They are tracked in inFlight, which shutdown waits for.
   */
  async onApplicationBootstrap(): Promise<void> {
    await this.tick().catch((err: unknown) => this.log.warn(`start-up sweep failed: ${err instanceof Error ? err.message : String(err)}`));
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
    this.closing.abort();
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
    // Shutdown may have begun while this run was between its SELECT and here (a sweep's page, a lease):
    // a draining gateway starts no new vendor call, the call stays approved for a live replica's sweep.
    if (this.stopping) {
      this.log.log({ toolCallId }, 'approved call not claimed: the gateway is stopping; a sweep (another replica, or after the restart) runs it');
      return;
    }
    const call = await this.claim(toolCallId);
    if (!call) return;
    if (call.status === 'blocked') {
      this.log.warn({ toolCallId }, 'approved call blocked: tool calling was turned off for the org after it was submitted');
      settledCalls.emit('settled', call.id);
      return;
    }
    const base = { id: call.id, orgId: call.org_id, runId: call.run_id, toolUseId: call.tool_use_id, digest: call.action_digest, from: 'running' as const };
    // The call is `running` from here: an error escaping before the executor is called would leave it so, and
    // the orphan sweep would call it indeterminate ("may have reached the vendor") though nothing was sent.
    // Whatever goes wrong before then ends running → failed / EXECUTION_ERROR, recorded as not executed
    // (running → approved, to let a later pass try again, is not a transition ARCHITECTURE.md allows).
    let ready: Ready | NotExecuted;
    try {
      ready = this.prepare(call);
    } catch (err) {
      this.log.error({ toolCallId, err: err instanceof Error ? err.message : String(err) }, 'approved call could not be prepared: recorded failed, not executed');
      ready = { notExecuted: 'the approved call could not be prepared for execution' };
    }
    let outcome: ExecutionOutcome;
    let tool: RecordedTool;
    if ('notExecuted' in ready) {
      // Recorded like any outcome (terminal event, settled, raw input deleted below), though nothing was sent:
      // the names the call was recorded with, and no cost.
      outcome = { status: 'failed', errorCode: 'EXECUTION_ERROR', errorText: ready.notExecuted, vendorStatus: null, retries: [], durationMs: 0, vendorReached: false };
      tool = { toolName: call.tool_name, action: call.action, costCents: 0 };
    } else {
      // An exception out of here (the executor turns its own into outcomes) may come after the request was
      // sent: the call is then left running, and the orphan sweep's indeterminate is the honest answer.
      outcome = await this.executor.execute({ entry: ready.entry, orgId: call.org_id, toolCallId: call.id, idempotencyKey: call.idempotency_key, params: ready.params });
      release(); // the lease counts calls at the vendor: give it back before the outcome commit
      tool = ready.tool;
    }
    // The approved input goes in the outcome's own statement (also when that is written late, after an
    // outage); a call settled elsewhere meanwhile was settled by the orphan sweep, which deletes it too.
    await this.calls.recordOutcome({ ...base, tool, dropInput: true }, outcome);
  }

  /**
   * The claim (approved-call-claim.sql.ts), sent again while the database is unavailable. A resend is safe
   * however the first attempt ended — not committed (the call is still approved: a fresh claim), or committed
   * with its answer lost (the claim token finds it ours: resumed, as resumableWrite does for outcome writes) —
   * and it is what keeps a committed claim from being left running with no vendor request: the budget is the
   * time after which the orphan sweep may take the call anyway. Left unconfirmed (the database out longer, or
   * the gateway stopping), the call is either still approved (a later sweep runs it) or running with nothing
   * sent, which the orphan sweep will mark indeterminate: the one case the gateway cannot tell apart from a
   * crash at the vendor, and it needs the database gone for that long.
   */
  private async claim(toolCallId: string): Promise<ClaimedCall | undefined> {
    const token = randomUUID();
    const blockedStatus = httpStatusFor('blocked', 'FEATURE_DISABLED');
    try {
      const [call] = await retryWhileUnavailable(
        // Once the gateway is stopping, a resend only resumes a claim that may have committed: it makes no new one.
        () => this.sql.query<ClaimedCall>(CLAIM_APPROVED_CALL_SQL, [toolCallId, blockedStatus, token, !this.stopping]),
        { budgetMs: this.config.VENDOR_TIMEOUT_MS + this.config.STALE_RUNNING_MARGIN_MS, capMs: 1_000, signal: this.closing.signal },
      );
      return call;
    } catch (err) {
      // Any other error is the statement's own: it rolled back, the call is still approved, a later sweep retries.
      if (!isDatabaseUnavailable(err)) throw err;
      this.log.warn({ toolCallId }, 'approved call claim unconfirmed (database unavailable): a later sweep runs it if it is still approved; if the claim committed, the orphan sweep will mark it indeterminate');
      return undefined;
    }
  }

  /** The catalog entry and the decrypted approved input, or why the call cannot be executed. */
  private prepare(call: ClaimedCall): Ready | NotExecuted {
    const entry = this.catalog.find(call.tool_name, call.action);
    if (!entry) {
      this.log.error({ toolCallId: call.id }, 'approved call refers to an action no longer in the catalog');
      return { notExecuted: 'the approved action is no longer in the catalog' };
    }
    if (!call.key_id || !call.iv || !call.ciphertext || !call.auth_tag) return { notExecuted: 'the approved input is no longer available' };
    let params: Record<string, unknown>;
    try {
      const envelope = { keyId: call.key_id, iv: call.iv, ciphertext: call.ciphertext, authTag: call.auth_tag };
      params = this.cipher.decryptJson<Record<string, unknown>>(envelope, inputAad(call.org_id, call.id));
    } catch {
      return { notExecuted: 'the approved input is no longer available' };
    }
    return { entry, params, tool: recordedTool(entry) };
  }
}
