import { Inject, Injectable, Logger } from '@nestjs/common';
import { ToolCatalogService, type CatalogEntry } from '../catalog/tool-catalog.service.js';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { loggableErrorWithStack } from '../common/errors/loggable-error.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { notSentOutcome, vendorRefusedOf, type ExecutionErrorCode, type ExecutionOutcome } from '../executor/execution-outcome.js';
import type { NewLedgerEvent } from '../ledger/ledger-events.service.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { redactOutput } from '../redaction/redaction.service.js';
import { countToolCall } from './count-tool-call.js';
import { ResultsStore } from './results.store.js';
import { settledCalls } from './stored-call.js';
import { StoredCallAnswers } from './stored-call-answers.js';
import { buildToolCallBody, httpStatusFor, type StoredResult } from './tool-call-body.js';
import { OutcomeNotWritten, ToolCallLedger, type KeptWriteLogs, type OutcomeRow } from './tool-call-ledger.js';
import { assertTransition } from './tool-call-lifecycle.js';
import { respond, type ToolCallResponse } from './tool-call-response.js';
import type { ToolCallStatus } from './tool-call-status.js';

/** The error text of a call recorded by recordUnsent (for ops; the model gets the code's sanitized message). */
export const UNSENT_TEXT =
  'not sent to the vendor: the database became unavailable while the call was being recorded, and the request was answered 503; send it again under a new tool_use id';

/** A call not sent whose outcome was refused as it was, recorded from the gateway's own values (recordNotSentPlainly). */
export const NOT_SENT_PLAIN_TEXT = 'not sent to the vendor; its outcome could not be recorded as it was, so it is recorded without its details';
const NOT_SENT_PLAIN_LOGS: KeptWriteLogs = {
  what: 'unsent call (its outcome refused as it was; recorded plainly)',
  notWritten: 'unsent call: nothing to record (the call was settled elsewhere)',
};

/** What an outcome records about the tool: names for the events and metrics, the cost of a vendor call. */
export interface RecordedTool {
  toolName: string;
  action: string;
  costCents: number;
}

export const recordedTool = (entry: CatalogEntry): RecordedTool => ({ toolName: entry.tool.name, action: entry.action.name, costCents: entry.action.costCents });

/** An executed call whose outcome is to be written, and the state it leaves. */
export interface ExecutedCall {
  id: string;
  orgId: string;
  runId: string;
  tool: RecordedTool;
  toolUseId: string;
  digest: string;
  from: ToolCallStatus;
  dropInput?: boolean;
  /**
   * The key whose request runs the call (API.md §9: an event records the key that caused it): its outcome events
   * name it as its requested and started events do. None for a call run after an approval: the gateway starts it
   * (its started event has no actor either; the approval's events name who decided).
   */
  actor?: { keyId: string; role: string };
}

@Injectable()
export class OutcomeRecorder {
  private readonly log = new Logger('ToolCalls');

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly ledger: ToolCallLedger,
    private readonly results: ResultsStore,
    private readonly answers: StoredCallAnswers,
    private readonly catalog: ToolCatalogService,
    private readonly metrics: MetricsService,
    private readonly clock: Clock,
  ) {}

  /**
   * The result as the JSON stored and answered. One that cannot be serialized (the vendor layer refuses JSON nested
   * past MAX_VENDOR_JSON_DEPTH; this is the backstop for any other) is recorded as what it is — the vendor answered,
   * and its answer cannot be kept — never thrown: the call must not be left running with a 500. A write's outcome
   * is then unknown (indeterminate, as for any answer it cannot read), a read's a failure.
   */
  private serialized(c: ExecutedCall, outcome: ExecutionOutcome): { outcome: ExecutionOutcome; json: string | null } {
    if (outcome.status !== 'succeeded') return { outcome, json: null };
    try {
      return { outcome, json: JSON.stringify(outcome.result) ?? 'null' };
    } catch (err) {
      this.log.error({ toolCallId: c.id, err: err instanceof Error ? err.name : 'unknown' }, 'the vendor\'s answer could not be serialized: not kept');
      const write = this.catalog.find(c.tool.toolName, c.tool.action)?.action.sideEffect !== 'read';
      const errorText = 'the vendor answered with a body the gateway cannot keep (it could not be serialized)';
      const { retries, durationMs, vendorStatus } = outcome;
      return {
        outcome: write
          ? { status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN', errorText, vendorStatus, retries, durationMs, vendorReached: true }
          : { status: 'failed', errorCode: 'VENDOR_ERROR', errorText, vendorStatus, vendorRefused: false, retries, durationMs, vendorReached: true },
        json: null,
      };
    }
  }

  /** Writes the outcome of an executed call and answers with the tool-call body. Also used by approvals. */
  async recordOutcome(c: ExecutedCall, given: ExecutionOutcome): Promise<ToolCallResponse> {
    const { outcome, json } = this.serialized(c, given);
    const vendorReached = outcome.vendorReached;
    const { row, events } = this.outcomeWrite(c, outcome, json, this.clock.now());
    const { status, errorCode, retryAfterSeconds } = row;
    const settled = (): void => this.settled(c, row);
    let written: boolean;
    try {
      written = await this.ledger.writeOutcomeDurably(row, events, (late) => late && settled());
    } catch (err) {
      if (!(err instanceof OutcomeNotWritten)) {
        if (!vendorReached) this.recordNotSentPlainly(c, outcome);
        throw this.outcomeWriteFailed(c, vendorReached, err);
      }
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
      const stored = await this.answers.findById(c.orgId, c.id);
      return this.answers.answerStored(stored!, c.toolUseId, false);
    }
    settled();
    const facts = { id: c.id, status, errorCode, errorText: null, retryAfterSeconds, vendorStatus: outcome.status === 'succeeded' ? null : outcome.vendorStatus, vendorRefused: vendorRefusedOf(outcome) };
    const result: StoredResult = outcome.status === 'succeeded' && json !== null ? { found: true, value: outcome.result, json } : { found: false };
    return respond(buildToolCallBody(facts, result, c.toolUseId, false, this.config.RESULT_BUDGET_BYTES), httpStatusFor(status, errorCode), false);
  }

  /**
   * The outcome statement failed with an error retrying cannot help (not "database unavailable": a constraint, a value
   * the database refused). The row stays `running` and the orphan sweep makes it `indeterminate`. The client is told
   * which call it was and that its outcome is not recorded, as for a database outage, not a bare 500: an agent told only
   * "internal error" would send it again under a new id, and the vendor would act twice.
   */
  private outcomeWriteFailed(c: ExecutedCall, vendorReached: boolean, err: unknown): AppError {
    const then = vendorReached ? 'the orphan sweep will mark the call indeterminate' : 'it is recorded plainly as failed, not sent';
    this.log.error({ toolCallId: c.id, err: loggableErrorWithStack(err) }, `outcome not recorded: the write failed; ${then}`);
    const what = vendorReached
      ? 'the vendor was called, but its outcome could not be recorded; the call becomes indeterminate'
      : 'the outcome of this call (the vendor was not called) could not be recorded as it was; it is recorded as failed, not sent';
    return new AppError(
      'INTERNAL',
      `${what}. Send the same tool_use again (same id or Idempotency-Key) later to read it${vendorReached ? ', never under a new id: that would call the vendor again' : ''}`,
      { fields: { toolCallId: c.id, outcomeConfirmed: false } },
    );
  }

  /**
   * A call that never reached its vendor whose outcome the database refused (an error retrying cannot help): the
   * same failure, recorded from the gateway's own values only (its code and a fixed text; none of what was refused),
   * in the background. Left running, the orphan sweep would call it indeterminate ("may have run") and charge it the
   * action's cost, though the gateway knew nothing was sent.
   */
  private recordNotSentPlainly(c: ExecutedCall, outcome: ExecutionOutcome): void {
    const errorCode = outcome.status === 'failed' ? outcome.errorCode : 'EXECUTION_ERROR';
    this.settleNotSent(c, errorCode, NOT_SENT_PLAIN_TEXT, outcome.durationMs, NOT_SENT_PLAIN_LOGS);
  }

  /**
   * A new call whose intent statement may have committed with its answer lost, while the database stayed
   * unavailable past the intent's retries: the request was answered 503 and the vendor was never called. Once the
   * database is back, the call is settled as failed (EXECUTION_ERROR: not sent, not charged), in the background,
   * instead of staying `running` until the orphan sweep calls it `indeterminate` ("may have run") when it never
   * left. Nothing is written if the intent never committed (there is no row in `running`).
   */
  recordUnsent(c: ExecutedCall): void {
    this.settleNotSent(c, 'EXECUTION_ERROR', UNSENT_TEXT, 0);
  }

  /** A call that never reached its vendor settled as failed, in the background (ToolCallLedger.settleUnsent): not charged. */
  private settleNotSent(c: ExecutedCall, errorCode: ExecutionErrorCode, errorText: string, durationMs: number, logs?: KeptWriteLogs): void {
    // The gateway's own trouble, passing: the model is told a new call may work.
    const outcome = notSentOutcome(errorText, { errorCode, durationMs, passing: true });
    const { row, events } = this.outcomeWrite(c, outcome, null, this.clock.now());
    this.ledger.settleUnsent(row, events, () => this.settled(c, row), logs);
  }

  /** Once an outcome is recorded: counted, and the long-polls waiting on the call woken. */
  private settled(c: ExecutedCall, row: OutcomeRow): void {
    countToolCall(this.catalog, this.metrics, c.tool.toolName, c.tool.action, row.status, row.errorCode);
    settledCalls.emit('settled', c.id);
  }

  /** The outcome statement's row and events for an executed call (`json`: the result's JSON text, when it succeeded). */
  private outcomeWrite(c: ExecutedCall, outcome: ExecutionOutcome, json: string | null, now: Date): { row: OutcomeRow; events: NewLedgerEvent[] } {
    const status = outcome.status;
    assertTransition(c.from, status);
    const errorCode = outcome.status === 'succeeded' ? null : outcome.errorCode;
    // Charged only when a request reached, or may have reached, the vendor (the executor knows; a write
    // that may have been sent counts as sent). Not the error code: CREDENTIALS_INVALID is a vendor 401
    // (charged) or undecryptable stored credentials (nothing sent), VENDOR_TIMEOUT may be a connect timeout.
    const vendorReached = outcome.vendorReached;
    const costCents = vendorReached ? c.tool.costCents : 0;
    const base = { toolName: c.tool.toolName, action: c.tool.action, digest: c.digest };
    const actor = c.actor ?? null;
    const events: NewLedgerEvent[] = outcome.retries.map((r) => ({
      orgId: c.orgId, type: 'tool_call.retried', runId: c.runId, toolCallId: c.id, actor, metadata: { ...base, attempt: r.attempt, delayMs: r.delayMs, reason: r.reason },
    }));
    const terminal = status === 'succeeded' ? 'tool_call.succeeded' : status === 'failed' ? 'tool_call.failed' : 'tool_call.indeterminate';
    events.push({
      orgId: c.orgId, type: terminal, runId: c.runId, toolCallId: c.id, actor,
      // What the row records beside its status, for verify to hold the row to (the output by its digest, added in the statement).
      metadata: { ...base, durationMs: outcome.durationMs, errorCode, vendorStatus: outcome.vendorStatus, retryCount: outcome.retries.length, costCents },
    });
    const row: OutcomeRow = {
      id: c.id, orgId: c.orgId, from: c.from, status, errorCode,
      errorText: outcome.status === 'succeeded' ? null : outcome.errorText,
      httpStatus: httpStatusFor(status, errorCode),
      // The ledger's copy, capped when written (ledger-output-cap.ts); the answer keeps the whole result.
      outputRedacted: outcome.status === 'succeeded' ? redactOutput(outcome.result) : null,
      retryCount: outcome.retries.length,
      retryAfterSeconds: outcome.status !== 'succeeded' ? (outcome.retryAfterSeconds ?? null) : null,
      vendorStatus: outcome.vendorStatus, vendorRefused: vendorRefusedOf(outcome), durationMs: outcome.durationMs,
      costCents,
      truncated: json !== null && Buffer.byteLength(json) > this.config.RESULT_BUDGET_BYTES,
      result: json !== null ? this.results.seal(c.orgId, c.id, json, now) : undefined,
      dropInput: c.dropInput,
      actor,
      knownAtMs: performance.now(),
    };
    return { row, events };
  }
}
