import { Inject, Injectable, Logger, Optional, type BeforeApplicationShutdown, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { ShutdownPhase } from '../common/shutdown-phase.js';
import { ToolCatalogService, type CatalogEntry } from '../catalog/tool-catalog.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { countToolCall } from '../tool-calls/count-tool-call.js';
import { Clock } from '../common/clock.js';
import { FailureStreak } from '../common/failure-streak.js';
import { PeriodicTask } from '../common/periodic-task.js';
import { DecryptionError, EnvelopeCipher } from '../common/crypto/envelope-cipher.js';
import { loggableErrorText, loggableErrorWithStack } from '../common/errors/loggable-error.js';
import { sharedAbortController } from '../common/shared-abort.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { Sql } from '../db/sql.js';
import { notSentOutcome, type ExecutionOutcome } from '../executor/execution-outcome.js';
import { RuntimeToolExecutor } from '../executor/runtime-tool-executor.js';
import { inputAad, recordedTool, settledCalls, ToolCallsService, type RecordedTool } from '../tool-calls/tool-calls.service.js';
import type { ApprovalKind } from './approval-request.entity.js';
import { ApprovedCallClaimer, type ClaimedCall } from './approved-call-claimer.js';
import { ApprovalExpiries } from './approval-expiries.js';
import { EXPIRY_BATCH, settleApprovalsSql, type SettledApproval } from './approval-settle.sql.js';
import { APPROVAL_NOT_BOUND, APPROVAL_ROW_AGREES_SQL } from './approval-binding.js';

const SWEEP_EVERY_MS = 5_000;

/** An approved call as looked up before it takes a vendor slot. */
interface ApprovedCall {
  org_id: string;
  tool_name: string;
  action: string;
}

/** Its encrypted approved input, as stored until the call has run or been refused, and the kind of approval it was approved on. */
interface StoredInput {
  key_id: string;
  iv: Buffer;
  ciphertext: Buffer;
  auth_tag: Buffer;
  approval_kind: ApprovalKind | null;
  /** Whether the approval row shows the call row's tool, action, redacted input and digest (null: no approval row). */
  shown_agrees: boolean | null;
}

interface Ready {
  entry: CatalogEntry;
  params: Record<string, unknown>;
  approvalKind: ApprovalKind | null;
  tool: RecordedTool;
}

interface NotExecuted {
  notExecuted: string;
}

/** The approved input is there but no loaded master key opens it: the call waits, approved, for the right key. */
interface Unreadable {
  unreadableUnder: string;
}

/** Calls remembered as unreadable per process; past it, a sweep looks at the others on every pass (and says so each time). */
const UNREADABLE_REMEMBERED = 10_000;
/**
 * How long a sweep leaves an unreadable call out before it tries it again: the keys of this process do not change, but
 * its row may (credentials:rotate re-seals a pending input under a loaded key while the gateway runs).
 */
const UNREADABLE_RETRY_MS = 60_000;

/** Why a resumed claim's call was not sent (ClaimedCall.error_code on a `running` call): its error text, for ops. */
const RESUMED_BUT_STOPPED: Record<NonNullable<ClaimedCall['error_code']>, string> = {
  RUN_NOT_ACTIVE: 'its run ended while its claim was being recorded (the answer lost, the claim sent again); nothing was sent',
  FEATURE_DISABLED: "the org's tool calling was turned off while its claim was being recorded (the answer lost, the claim sent again); nothing was sent",
  APPROVAL_REVOKED: 'the key that approved it was revoked while its claim was being recorded (the answer lost, the claim sent again); nothing was sent',
  POLICY_BLOCKED: "the org's policy blocks it since its claim was recorded (the answer lost, the claim sent again); nothing was sent",
};

/** How long the start-up pass settles overdue approvals before the gateway listens (the periodic pass does the rest). */
const STARTUP_EXPIRY_BUDGET_MS = 1_000;

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
  /**
   * Approved calls whose input no key this process has loaded opens (a wrong MASTER_ENCRYPTION_KEY, a key removed
   * before its rows were rotated), with when a sweep tries each again: said once each, and left out of the sweep
   * meanwhile (they would take its turns per org × vendor on every pass). A decision tries at once.
   */
  private readonly unreadable = new Map<string, number>();
  /**
   * Approved calls waiting for their org × vendor (an open breaker, every slot taken), with why they were last said to;
   * each sweep forgets those it no longer lists (run, settled), so one deferred again later is said again.
   */
  private readonly deferredSaid = new Map<string, string>();
  /** The expiry step failing pass after pass (the database away): said when it starts, then as a streak. */
  private readonly expiryFailures = new FailureStreak('expiry of overdue approvals', this.log, 'approved calls are still started, and the next pass goes on with the expiry');

  /** The unreadable calls a sweep leaves out now (those due for another try are tried: still unreadable, they are not said again). */
  private unreadableNow(): string[] {
    const now = this.clock.nowMs();
    const out: string[] = [];
    for (const [id, retryAt] of this.unreadable) {
      if (retryAt > now) out.push(id);
    }
    return out;
  }
  /** Set when shutdown begins: no new vendor call starts from here. */
  private stopping = false;
  /** A call settled in this process (its run ended, say) no longer waits for a slot kept for it. */
  private readonly onSettled = (id: string): void => this.calls.unreserve(id);
  /** Aborted when the database is about to close: a claim stops waiting for it to come back. */
  private readonly closing = sharedAbortController();

  constructor(
    private readonly sql: Sql,
    private readonly catalog: ToolCatalogService,
    private readonly executor: RuntimeToolExecutor,
    private readonly calls: ToolCallsService,
    private readonly claimer: ApprovedCallClaimer,
    private readonly cipher: EnvelopeCipher,
    private readonly clock: Clock,
    private readonly metrics: MetricsService,
    private readonly expiries: ApprovalExpiries,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Optional() phase?: ShutdownPhase,
  ) {
    this.task.haltOn(phase?.signal);
  }

  /**
   * The start-up pass starts the approved calls left by a previous process without waiting for them
   * (as the periodic pass does): start-up, and so /healthz and every route, must not wait for a slow
   * vendor. They are tracked in inFlight, which shutdown waits for.
   */
  async onApplicationBootstrap(): Promise<void> {
    settledCalls.on('settled', this.onSettled);
    // The expiry for STARTUP_EXPIRY_BUDGET_MS at most: start-up (and so /healthz, and a stop signal) does not wait for a
    // backlog of overdue approvals (40,000 held the listen back 20 s); reads show them expired already, and the
    // periodic pass settles the rest.
    await this.tick(EXPIRY_BATCH, performance.now() + STARTUP_EXPIRY_BUDGET_MS).catch((err: unknown) => this.log.warn(`start-up sweep failed: ${loggableErrorText(err)}`));
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
    settledCalls.off('settled', this.onSettled);
    await this.task.stop();
    this.closing.abort();
    await Promise.allSettled([...this.inFlight]); // the calls already started record their outcomes before the database closes
  }

  /**
   * Expires overdue approvals, then starts every approved call nobody has started, and waits for those runs.
   * `expiryBatch`: overdue approvals settled per statement (a test passes a small one).
   */
  async sweep(expiryBatch = EXPIRY_BATCH): Promise<{ expired: number; started: number }> {
    const { expired, runs } = await this.startSweep(expiryBatch);
    await Promise.all(runs);
    return { expired, started: runs.length };
  }

  /**
   * The periodic pass: like sweep() but it does not wait for the calls it
   * started, so a slow vendor never holds back the next pass's expiries (a
   * call past its approval's expiry must not keep showing waiting_approval).
   */
  async tick(expiryBatch = EXPIRY_BATCH, expiryDeadline = Infinity): Promise<{ expired: number; started: number }> {
    const { expired, runs } = await this.startSweep(expiryBatch, expiryDeadline);
    return { expired, started: runs.length };
  }

  /**
   * The expiry failing (a statement timeout, a lock it could not get, the database briefly away) does not hold
   * back the approved calls: they are looked up and started all the same, and the next pass takes the expiry up
   * again where this one stopped (each batch commits on its own).
   */
  private async startSweep(expiryBatch: number, expiryDeadline = Infinity): Promise<{ expired: number; runs: Promise<void>[] }> {
    const progress = { expired: 0 };
    try {
      await this.expireOverdue(this.clock.now(), expiryBatch, progress, expiryDeadline);
      this.expiryFailures.succeeded();
    } catch (err) {
      this.expiryFailures.failed(loggableErrorText(err));
    }
    await this.forgetSettledUnreadable();
    await this.releaseSettledReservations();
    // Fair across orgs: each org × vendor's oldest calls first, in turns, and no more of one org × vendor
    // than its concurrency limit lets run at once — one org's backlog of approved calls neither fills the
    // page nor holds back another org's call until it has drained.
    const approved = await this.sql.query<{ id: string }>(
      `SELECT id FROM (
         SELECT id, updated_at, row_number() OVER (PARTITION BY org_id, vendor ORDER BY updated_at, id) AS turn
           FROM tool_calls WHERE status = 'approved' AND NOT (id = ANY($1::uuid[]))) q
        WHERE turn <= $2
        ORDER BY turn, updated_at, id LIMIT 100`,
      [[...this.running, ...this.unreadableNow()], this.config.VENDOR_CONCURRENCY_LIMIT],
    );
    // A deferred call no longer among the approved ones (run, settled, or past this page) is said again if deferred again.
    const listed = new Set(approved.map((r) => r.id));
    for (const id of this.deferredSaid.keys()) if (!listed.has(id) && !this.running.has(id)) this.deferredSaid.delete(id);
    return { expired: progress.expired, runs: approved.map((r) => this.runSoon(r.id)) };
  }

  /**
   * Unreadable calls due for another try that are no longer approved (their run ended, ops reconciled them, a replica
   * with the right key ran them) are forgotten: the decision or claim that would forget them never comes, and over
   * weeks they would fill the map (UNREADABLE_REMEMBERED), the calls unreadable after them said on every pass.
   * Nothing is read while none is due (always, but with a wrong or missing master key).
   */
  private async forgetSettledUnreadable(): Promise<void> {
    const now = this.clock.nowMs();
    const due = [...this.unreadable].filter(([, retryAt]) => retryAt <= now).map(([id]) => id);
    if (due.length === 0) return;
    const still = await this.sql.query<{ id: string }>(`SELECT id FROM tool_calls WHERE id = ANY($1::uuid[]) AND status = 'approved'`, [due]);
    const approved = new Set(still.map((r) => r.id));
    for (const id of due) if (!approved.has(id)) this.unreadable.delete(id);
  }

  /**
   * Slots kept for approved calls that no longer wait (their run ended, another replica claimed them) are given back:
   * the run's end on this replica lets them go at once (onSettled), one on another replica is seen here, on the next
   * pass, rather than refusing the org's calls until the reservation lapses. Nothing is read while none is kept.
   */
  private async releaseSettledReservations(): Promise<void> {
    const holders = this.calls.reservationHolders();
    if (holders.length === 0) return;
    const still = await this.sql.query<{ id: string }>(`SELECT id FROM tool_calls WHERE id = ANY($1::uuid[]) AND status = 'approved'`, [holders]);
    const approved = new Set(still.map((r) => r.id));
    for (const id of holders) if (!approved.has(id)) this.calls.unreserve(id);
  }

  /**
   * Settles every approval overdue at `now` (every org), `batch` at a time, the first to expire first: one statement over a
   * large backlog could outlast the statement timeout on every pass and never catch up (as the results purge,
   * ResultsStore.purgeExpired). Each batch is a statement and a transaction of its own (none is held across
   * batches); `now` is fixed for the pass, so approvals coming due meanwhile wait for the next one, and once the gateway
   * is stopping it ends after the batch in flight. `progress`
   * counts the batches committed so far, also when a later one fails. `deadline` (performance.now() ms): the
   * start-up pass ends after the batch that reaches it (STARTUP_EXPIRY_BUDGET_MS), the periodic pass settles the rest.
   */
  async expireOverdue(now: Date, batch = EXPIRY_BATCH, progress = { expired: 0 }, deadline = Infinity): Promise<number> {
    for (;;) {
      const rows = await this.sql.query<SettledApproval>(settleApprovalsSql('expired', { batched: true }), [null, 'expired', now, null, null, null, batch]);
      this.expiries.recorded(rows);
      progress.expired += rows.length;
      if (rows.length === 0 || rows.length < batch) return progress.expired;
      if (performance.now() >= deadline) return progress.expired; // the start-up pass: the periodic one goes on
      // Stopping: the rest waits for another replica's sweep, or the restart's. Shutdown waits for this pass
      // (beforeApplicationShutdown), and a backlog of thousands would hold the stop a batch at a time.
      if (this.stopping) return progress.expired;
    }
  }

  /** Fire-and-forget from a decision or a sweep; errors are logged, and a later sweep retries anything left approved. */
  runSoon(toolCallId: string): Promise<void> {
    if (this.stopping) {
      this.log.log({ toolCallId }, 'approved call not started: the gateway is stopping; a sweep (another replica, or after the restart) runs it');
      return Promise.resolve();
    }
    const p = this.run(toolCallId).catch((err: unknown) => this.log.error({ toolCallId, err: loggableErrorWithStack(err) }, 'approved call failed to run'));
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
    return p;
  }

  /**
   * Claims (approved → running) and executes one call; a no-op if someone else
   * claimed it. Approval does not bypass the gates an approval cannot speak
   * for: the call takes a slot of the org × vendor concurrency limit (when
   * they are all taken it stays approved and a later sweep runs it); the
   * org's `tool_calling_enabled` flag is re-read in the claim itself — turned
   * off since the call was submitted, the call ends approved → blocked
   * FEATURE_DISABLED (the kill switch holds); and the org's current policy is
   * decided again on the approved params, the claim holding only while that
   * policy is still the org's — a block added since (a fraud incident), or an
   * expert approval asked for since of a call the client approved, ends the
   * call approved → blocked POLICY_BLOCKED. Blocked, nothing reaches the vendor.
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

  /** Says why an approved call waits once per reason, not on every sweep that finds it still waiting. */
  private deferred(toolCallId: string, orgId: string, vendor: string, why: string): void {
    if (this.deferredSaid.get(toolCallId) === why) return;
    this.deferredSaid.set(toolCallId, why);
    this.log.log({ toolCallId, orgId, vendor }, why);
  }

  private async runOnce(toolCallId: string): Promise<void> {
    const [pending] = await this.sql.query<ApprovedCall>(
      `SELECT org_id, tool_name, action FROM tool_calls WHERE id = $1 AND status = 'approved'`,
      [toolCallId],
    );
    if (!pending) {
      this.unreadable.delete(toolCallId); // settled (run ended, claimed elsewhere): nothing left to remember
      this.calls.unreserve(toolCallId);
      return;
    }
    const vendor = this.catalog.find(pending.tool_name, pending.action)?.vendor;
    // An open org × vendor breaker would fail the call once claimed (CIRCUIT_OPEN, nothing sent) and use the approval
    // up: it stays approved, as for a full lease, and a sweep after the cooldown runs it.
    if (vendor && this.executor.breakerFor(pending.org_id, vendor).refusing) {
      this.deferred(toolCallId, pending.org_id, vendor, 'approved call deferred: the org × vendor circuit breaker is open; a sweep after its cooldown runs it');
      return;
    }
    const release = vendor ? this.calls.leaseFor(pending.org_id, vendor, toolCallId) : () => undefined;
    if (!release) {
      // The next free slot is kept for it (new calls there are refused meanwhile), for two sweeps: an approved write
      // does not wait behind the org's direct calls for as long as they keep coming. It runs once one is given back,
      // not at the next sweep: the new calls refused meanwhile are told to retry in a second.
      this.calls.reserveFor(pending.org_id, vendor!, 2 * SWEEP_EVERY_MS, toolCallId, () => void this.runSoon(toolCallId));
      this.deferred(toolCallId, pending.org_id, vendor!, 'approved call deferred: the org × vendor concurrency limit is reached; new calls there wait, and the next sweep runs it');
      return;
    }
    try {
      await this.claimAndExecute(toolCallId, pending, release);
    } finally {
      release();
    }
  }

  private async claimAndExecute(toolCallId: string, pending: ApprovedCall, release: () => void): Promise<void> {
    // Shutdown may have begun while this run was between its SELECT and here (a sweep's page, a lease):
    // a draining gateway starts no new vendor call, the call stays approved for a live replica's sweep.
    if (this.stopping) {
      this.log.log({ toolCallId }, 'approved call not claimed: the gateway is stopping; a sweep (another replica, or after the restart) runs it');
      return;
    }
    // The approved input is read and prepared before the claim: the policy is decided on it, and no statement
    // stands between a committed claim and the vendor call. A call that cannot be prepared is claimed all the same
    // (the flag still applies) and ends running → failed / EXECUTION_ERROR, recorded as not executed (running →
    // approved, to let a later pass try again, is not a transition ARCHITECTURE.md allows; left running, the
    // orphan sweep would call it indeterminate though nothing was sent). The approval's kind comes with the input
    // (it never changes once the approval is asked for): the policy decided again may ask for a stronger one.
    const [input] = await this.sql.query<StoredInput>(
      // Given by a key that may decide expert approvals (an expert; an admin, who may decide either kind), a client
      // approval is as strong as an expert's.
      `SELECT i.key_id, i.iv, i.ciphertext, i.auth_tag,
              CASE WHEN a.decided_role IN ('expert', 'admin') THEN 'expert' ELSE a.kind END AS approval_kind,
              CASE WHEN a.id IS NOT NULL THEN ${APPROVAL_ROW_AGREES_SQL} END AS shown_agrees
         FROM tool_call_inputs i
         LEFT JOIN approval_requests a ON a.tool_call_id = i.tool_call_id
         LEFT JOIN tool_calls t ON t.id = i.tool_call_id AND t.org_id = i.org_id
        WHERE i.tool_call_id = $1 AND i.org_id = $2`,
      [toolCallId, pending.org_id],
    );
    let ready: Ready | NotExecuted | Unreadable;
    try {
      ready = this.prepare(toolCallId, pending, input);
    } catch (err) {
      this.log.error(
        { toolCallId, orgId: pending.org_id, tool: pending.tool_name, action: pending.action, err: loggableErrorWithStack(err) },
        'approved call could not be prepared: it is not executed',
      );
      ready = { notExecuted: 'the approved call could not be prepared for execution' };
    }
    if ('unreadableUnder' in ready) {
      // Not claimed, not failed, its input kept: a human approved it, and only this process's keys are wrong.
      const said = this.unreadable.has(toolCallId);
      if (said || this.unreadable.size < UNREADABLE_REMEMBERED) this.unreadable.set(toolCallId, this.clock.nowMs() + UNREADABLE_RETRY_MS);
      if (!said) {
        this.log.error(
          { toolCallId, keyId: ready.unreadableUnder, loadedKeyIds: this.cipher.keyIds },
          `approved call not run: no loaded master key opens its approved input (sealed under key id "${ready.unreadableUnder}"). ` +
            'Is MASTER_ENCRYPTION_KEY(S) the key this database was written with? The call stays approved with its input kept, and runs once a gateway with the right key is started',
        );
      }
      return;
    }
    this.unreadable.delete(toolCallId);
    const approved = 'notExecuted' in ready ? null : ready;
    const call = await this.claimer.claim(pending.org_id, toolCallId, approved, { mayClaim: () => !this.stopping, closing: this.closing.signal });
    if (!call) return;
    if (call.status === 'blocked') {
      const why =
        call.error_code === 'POLICY_BLOCKED'
          ? "the org's current policy blocks it"
          : call.error_code === 'APPROVAL_REVOKED'
            ? 'the key that approved it was revoked before it ran'
            : call.error_code === 'RUN_NOT_ACTIVE'
              ? 'its run ended before it ran'
              : 'tool calling was turned off for the org after it was submitted';
      this.log.warn({ toolCallId, errorCode: call.error_code }, `approved call blocked: ${why}`);
      // Answered blocked from here on (a re-post, the result): counted as answered, as a call that runs is.
      countToolCall(this.catalog, this.metrics, call.tool_name, call.action, 'blocked', call.error_code);
      settledCalls.emit('settled', call.id);
      return;
    }
    const base = { id: call.id, orgId: call.org_id, runId: call.run_id, toolUseId: call.tool_use_id, digest: call.action_digest, from: 'running' as const };
    let outcome: ExecutionOutcome;
    let tool: RecordedTool;
    // Not sent, and recorded like any outcome (terminal event, settled, raw input deleted below): the names the call
    // was recorded with, and no cost.
    const unsent: RecordedTool = { toolName: call.tool_name, action: call.action, costCents: 0 };
    // A claim resumed after its answer was lost, whose call may no longer be sent: a change answered 200/204 between the
    // claim's attempts (the run's end, the kill switch, the approver's revocation, a block) is in force. It passes, as
    // the executor's own stop after a wait does; a call that cannot be run does not.
    const stopped = call.error_code === null ? undefined : RESUMED_BUT_STOPPED[call.error_code];
    if (stopped !== undefined) {
      this.log.warn({ toolCallId, errorCode: call.error_code }, `approved call not sent: ${stopped}`);
      outcome = notSentOutcome(stopped, { passing: true });
      tool = unsent;
    } else if ('notExecuted' in ready) {
      outcome = notSentOutcome(ready.notExecuted);
      tool = unsent;
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

  /** The catalog entry and the decrypted approved input, or why the call cannot be executed, or that no loaded key opens its input. */
  private prepare(toolCallId: string, call: ApprovedCall, input: StoredInput | undefined): Ready | NotExecuted | Unreadable {
    const entry = this.catalog.find(call.tool_name, call.action);
    if (!entry) {
      this.log.error({ toolCallId }, 'approved call refers to an action no longer in the catalog');
      return { notExecuted: 'the approved action is no longer in the catalog' };
    }
    if (!input) return { notExecuted: 'the approved input is no longer available' };
    let params: Record<string, unknown>;
    try {
      const envelope = { keyId: input.key_id, iv: input.iv, ciphertext: input.ciphertext, authTag: input.auth_tag };
      params = this.cipher.decryptJson<Record<string, unknown>>(envelope, inputAad(call.org_id, toolCallId));
    } catch (err) {
      // A ciphertext the keys do not open is no proof the input is gone: failing the call would delete it for good.
      if (err instanceof DecryptionError) return { unreadableUnder: input.key_id };
      return { notExecuted: 'the approved input is no longer available' };
    }
    // What the approver was shown must be the call that runs (approval-binding.ts): else nothing is sent.
    if (input.shown_agrees === false) {
      this.log.error({ toolCallId }, 'approved call not executed: its approval row differs from the call');
      return { notExecuted: `not executed: ${APPROVAL_NOT_BOUND}` };
    }
    return { entry, params, approvalKind: input.approval_kind, tool: recordedTool(entry) };
  }
}
