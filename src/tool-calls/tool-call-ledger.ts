import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { databaseCause, failedStatementFields, isDatabaseUnavailable } from '../common/errors/database-errors.js';
import { sharedAbortController } from '../common/shared-abort.js';
import { Sql } from '../db/sql.js';
import type { NewLedgerEvent } from '../ledger/ledger-events.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { resumableWrite, retryWhileUnavailable } from '../common/errors/unavailable-retry.js';
import { writeIntentRow, type ApprovalRow, type IntentResult, type IntentRow, type PolicyDecisionRow } from './tool-call-intent.js';
import { rowHoldsOutcome, writeOutcomeRow, type OutcomeRow } from './tool-call-outcome-row.js';

export type { ApprovalRow, IntentResult, IntentRow, PolicyDecisionRow } from './tool-call-intent.js';
export type { OutcomeRow } from './tool-call-outcome-row.js';

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

/** How a write kept in memory (keepTrying) is named in the log. */
export interface KeptWriteLogs {
  what: string;
  /** When the write found the call no longer running. */
  notWritten: string;
}
const OUTCOME_LOGS: KeptWriteLogs = { what: 'outcome', notWritten: 'outcome not recorded: the call was settled elsewhere meanwhile' };
const UNSENT_LOGS: KeptWriteLogs = {
  what: 'unsent call (its intent may have committed; the vendor was not called)',
  notWritten: 'unsent call: nothing to record (its intent did not commit, or the call was settled elsewhere)',
};

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

/**
 * The two durable writes of a tool call, each ONE statement (so one round trip
 * and its own transaction): the intent (idempotency reservation + row + policy
 * decision + approval + events) and the outcome (row + encrypted result +
 * events). Nothing is held open while the vendor is called.
 */
@Injectable()
export class ToolCallLedger implements OnApplicationShutdown {
  private readonly log = new Logger('ToolCallLedger');
  /**
   * Aborted once the HTTP drain is over (onApplicationShutdown, before the
   * database pool closes): outcome writes kept in memory stop waiting. Not
   * earlier: requests still draining must ride out a database blip as always.
   */
  private readonly closing = sharedAbortController();
  /** Outcome writes still trying after their request was answered 503. */
  private readonly late = new Set<Promise<void>>();
  /** Vendor calls in flight whose outcome is still to be written (see track). */
  private readonly working = new Set<Promise<unknown>>();
  /** Outcomes this process had and gave up on while stopping (the database unavailable): see droppedAtStop. */
  private dropped = 0;

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

  /**
   * How many outcomes (or unsent calls' settlings) this process knew and did not record because the database was
   * unavailable while it stopped: the orphan sweep marks those calls indeterminate, for an operator to reconcile. Not
   * a clean stop: the process exits 1 (gateway-main).
   */
  get droppedAtStop(): number {
    return this.dropped;
  }

  /** Outcome writes kept in memory, still trying (for tests and metrics). */
  get lateOutcomeWrites(): number {
    return this.late.size;
  }

  /** The intent statement (see writeIntentRow for what each result means). */
  writeIntent(row: IntentRow, events: NewLedgerEvent[], policy: PolicyDecisionRow | null, approval: ApprovalRow | null, resent = false): Promise<IntentResult> {
    return writeIntentRow(this.sql, this.metrics, row, events, policy, approval, resent);
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
      throw new OutcomeNotWritten(this.keepTrying(o, attempt, lateWrite, OUTCOME_LOGS, err), err);
    }
  }

  /**
   * Records in the background, once the database is back, that a call whose intent may have committed was never
   * sent (see OutcomeRecorder.recordUnsent); `written` is called if it was (the row existed and was still running).
   */
  settleUnsent(o: OutcomeRow, events: NewLedgerEvent[], written: () => void, logs: KeptWriteLogs = UNSENT_LOGS): void {
    this.keepTrying(o, this.attemptOutcome(o, events), (w) => w && written(), logs);
  }

  /** writeOutcome attempts that tell an outcome of ours committed without its answer from one settled elsewhere. */
  private attemptOutcome(o: OutcomeRow, events: NewLedgerEvent[]): () => Promise<boolean> {
    return resumableWrite(() => this.writeOutcome(o, events), () => this.holdsOutcome(o));
  }

  /** Whether the call's row holds this outcome (see rowHoldsOutcome): read after a write whose answer was lost. */
  holdsOutcome(o: Pick<OutcomeRow, 'id' | 'status' | 'errorCode' | 'durationMs'>): Promise<boolean> {
    return rowHoldsOutcome(this.sql, o);
  }

  /** Keeps retrying in the background; false when it cannot (the gateway is stopping). */
  private keepTrying(o: OutcomeRow, attempt: () => Promise<boolean>, lateWrite: (written: boolean) => void, logs: KeptWriteLogs, first?: unknown): boolean {
    const fields = { toolCallId: o.id, status: o.status };
    const cause = databaseCause(first); // what the write that gave up first met (none for an unsent call's settling)
    if (this.closing.signal.aborted) {
      this.dropped += 1;
      this.log.warn({ ...fields, ...cause }, `${logs.what} not recorded (database unavailable while stopping): the orphan sweep will mark the call indeterminate`);
      return false;
    }
    this.log.warn({ ...fields, ...cause }, `${logs.what} not recorded yet (database unavailable): kept in memory, retrying`);
    const task = retryWhileUnavailable(attempt, { budgetMs: OUTCOME_WRITE_LATE_MS, capMs: 5_000, signal: this.closing.signal }).then(
      (written) => {
        this.log.log(fields, written ? `${logs.what} recorded after the database came back` : logs.notWritten);
        lateWrite(written);
      },
      (err: unknown) => {
        if (this.closing.signal.aborted) this.dropped += 1;
        this.log.warn({ ...fields, ...failedStatementFields(err, 'write failed') }, `${logs.what} not recorded: the orphan sweep will mark the call indeterminate`);
      },
    );
    this.late.add(task);
    void task.finally(() => this.late.delete(task));
    return true;
  }

  /** The outcome statement: false when someone else settled the call first (see writeOutcomeRow). */
  writeOutcome(o: OutcomeRow, events: NewLedgerEvent[]): Promise<boolean> {
    return writeOutcomeRow(this.sql, this.metrics, o, events);
  }
}
