import { Inject, Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import type { Principal } from '../../auth/principal.js';
import { ToolCatalogService } from '../../catalog/tool-catalog.service.js';
import { AppError } from '../../common/errors/app-error.js';
import { databaseCause } from '../../common/errors/database-errors.js';
import type { ErrorCode } from '../../common/errors/error-codes.js';
import { problemBody, toAppError } from '../../common/errors/problem.filter.js';
import { withToolResult } from '../../common/errors/problem-tool-result.js';
import { refusedBatchItem } from '../../common/http/json-body.js';
import { APP_CONFIG, type AppConfig } from '../../config/app-config.js';
import { RunsService, type RunSnapshot } from '../../runs/runs.service.js';
import type { ToolCallBody } from '../tool-call-body.js';
import { PLATFORM_KEY_REFUSED, ToolCallsService } from '../tool-calls.service.js';
import { echoableToolUseId, parseToolUse } from '../tool-use.js';
import { fitBatchBudget } from './batch-budget.js';
import { keyReusedHold, mayRunOnResend } from './batch-order.js';
import { parseBatchRequest, runBounded, scheduleBatch, type ScheduleKind } from './batch-request.js';
import { loggableErrorWithStack } from '../../common/errors/loggable-error.js';

/** A batch item the stopping gateway did not start. */
function gatewayStopping(): AppError {
  return new AppError('GATEWAY_STOPPING', 'the gateway is stopping, so this tool_use was not started; send the batch again (another replica runs it)', {
    retryAfterSeconds: 1,
  });
}

/**
 * Held writes are held within their batch only: nothing is recorded for them, so one sent again alone (or in a batch
 * without the write before it) is a new call and runs at once. Each held answer says so.
 */
const HELD_ONLY_HERE = 'nothing is recorded for this tool_use: sent again without that write before it, it is a new call and runs at once, ahead of it';

/** A write after one of the same batch still awaiting approval: not started, so writes reach vendors in the order given. */
function heldBehindApproval(index: number, toolCallId: string | undefined): AppError {
  return new AppError(
    'IDEMPOTENCY_IN_PROGRESS',
    `an earlier write of this batch (toolUses[${index}]${toolCallId ? `, tool call ${toolCallId}` : ''}) is waiting for approval, so this write was not started (writes run in the order given); send the batch again once that one has been decided (${HELD_ONLY_HERE})`,
    { retryAfterSeconds: 5 },
  );
}

/** A write after one of the same batch refused before it had an outcome, which a resend may run: not started, for the same reason. */
function heldBehindRefusal(index: number, code: ErrorCode): AppError {
  return new AppError(
    'IDEMPOTENCY_IN_PROGRESS',
    `an earlier write of this batch (toolUses[${index}]) has no outcome yet (${code}), so this write was not started (writes run in the order given); send the batch again: it runs after that one (${HELD_ONLY_HERE})`,
    { retryAfterSeconds: 1 },
  );
}

/**
 * A write after an item of the same batch refused 422 IDEMPOTENCY_KEY_REUSED whose id still names a write that has
 * not run (awaiting approval, or still to run or running), whatever the item was resent as: not started, for the
 * same reason.
 */
function heldBehindReusedKey(index: number, hold: 'approval' | 'executing'): AppError {
  const state = hold === 'approval' ? 'is waiting for approval' : 'has not finished';
  return new AppError(
    'IDEMPOTENCY_IN_PROGRESS',
    `an earlier tool_use of this batch (toolUses[${index}]) was refused (IDEMPOTENCY_KEY_REUSED), and the write first sent under its id ${state}, ` +
      `so this write was not started (writes run in the order given); send the batch again once that write has run (${HELD_ONLY_HERE})`,
    { retryAfterSeconds: hold === 'approval' ? 5 : 1 },
  );
}

/**
 * What an earlier write of this group that has not run puts on the writes after it: the "not started" answer, or
 * null when it ran or never will. One that awaits approval, or was refused for a reason a resend may overcome
 * (mayRunOnResend), would otherwise reach its vendor after them. Reads hold nothing: they change nothing. An item
 * refused 422 IDEMPOTENCY_KEY_REUSED is judged by the call first stored under its id, not by what it was resent as
 * (`kindOf` of the stored tool and action): that call, if a write that has not run, holds them (keyReusedHold).
 */
export function writeHoldOf(
  group: number[],
  kinds: ScheduleKind[],
  bodies: (ToolCallBody | null)[],
  refusals: (AppError | null)[],
  kindOf: (toolName: string, action: string) => ScheduleKind,
): (() => AppError) | null {
  for (const i of group) {
    const refusal = refusals[i];
    if (refusal?.code === 'IDEMPOTENCY_KEY_REUSED') {
      const reused = keyReusedHold(refusal, kindOf);
      if (reused) return () => heldBehindReusedKey(i, reused);
      continue;
    }
    if (kinds[i] !== 'write') continue;
    const body = bodies[i];
    if (body?.status === 'waiting_approval') return () => heldBehindApproval(i, body.toolCallId);
    if (refusal && mayRunOnResend(refusal.code)) return () => heldBehindRefusal(i, refusal.code);
  }
  return null;
}

/**
 * True when the run had ended and no item of the batch is a call it made before: nothing was answered from the
 * ledger, at least one item was refused 409 RUN_NOT_ACTIVE, and every other one was refused 400 BAD_REQUEST (not a
 * tool_use at all, so no call of the run either). The batch then answers one 409, as a single call would. Any
 * other refusal (a 422 IDEMPOTENCY_KEY_REUSED names a call the run made; a 503 may be one) keeps the per-item answers.
 */
export function endedRunOnly(bodies: readonly (ToolCallBody | null)[], refusals: readonly (AppError | null)[]): boolean {
  if (bodies.some((b) => b !== null)) return false;
  let ended = false;
  for (const r of refusals) {
    if (r?.code === 'RUN_NOT_ACTIVE') ended = true;
    else if (r?.code !== 'BAD_REQUEST') return false;
  }
  return ended;
}

/**
 * True when the key was found revoked before any item of the batch ran or was answered from the ledger: at least one
 * item was refused 401 UNAUTHENTICATED (the intent statement, or a replay's key check, found it revoked since this
 * replica cached it) and every other one 400 BAD_REQUEST. The batch then answers one 401, as a single call would —
 * not 200 with a 401 per tool_use. A key revoked midway (an item ran before) keeps the per-item answers.
 */
export function revokedKeyOnly(bodies: readonly (ToolCallBody | null)[], refusals: readonly (AppError | null)[]): boolean {
  if (bodies.some((b) => b !== null)) return false;
  let revoked = false;
  for (const r of refusals) {
    if (r?.code === 'UNAUTHENTICATED') revoked = true;
    else if (r?.code !== 'BAD_REQUEST') return false;
  }
  return revoked;
}

/** Statuses of a call that has not finished: the items after it in a batch wait for it. */
const STILL_EXECUTING = new Set(['running', 'approved', 'requested']);

/** Reads of one group in flight at once (also capped by the org × vendor lease limit). */
const READ_CONCURRENCY = 8;

/** One item's answer: the tool-call body, or problem+json (with its `status`) when the call has no ledger row. */
export type BatchEntry = ToolCallBody | Record<string, unknown>;

export interface BatchResponse {
  results: BatchEntry[];
}

/**
 * POST /v1/runs/:runId/tool-calls:batch. Every tool_use goes through
 * ToolCallsService.submit exactly as if posted alone (own ledger row, own
 * idempotency key run id + tool_use id); this service only decides the order
 * (and holds what follows an item still executing, and the writes after one
 * that has not run: waiting for approval, refused in a way a resend may
 * overcome, or any item refused 422 IDEMPOTENCY_KEY_REUSED while the write
 * first sent under its id has not run), keeps one item's failure
 * from touching the others, and applies the batch-wide budget to the answers.
 */
@Injectable()
export class ToolCallBatchService implements BeforeApplicationShutdown {
  private readonly log = new Logger('ToolCallBatch');
  /** Set before the HTTP drain: a batch still running starts no further vendor call (see submit). */
  private stopping = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly calls: ToolCallsService,
    private readonly catalog: ToolCatalogService,
    private readonly runs: RunsService,
  ) {}

  /**
   * From the start of the drain on (beginHttpDrain calls it, before app.close()): the items a running batch has not
   * started yet are not started (their answers say so; a resend replays what ran and runs the rest), so the drain
   * waits for one vendor call per batch at most, not for the rest of the batch one write after another. Not only
   * from this module's beforeApplicationShutdown: hooks of modules closed before it may wait on the database first.
   */
  stopStarting(): void {
    this.stopping = true;
  }

  beforeApplicationShutdown(): void {
    this.stopStarting();
  }

  async submit(p: Principal, runId: string, body: unknown, idempotencyHeader: unknown, correlationId: string): Promise<BatchResponse> {
    let toolUses: ReturnType<typeof parseBatchRequest>;
    let run: RunSnapshot;
    try {
      // Agent or org admin keys (API.md §1); a platform key has no org to act in (403, as for a single call).
      if (!p.orgId) throw new AppError('FORBIDDEN', PLATFORM_KEY_REFUSED);
      toolUses = parseBatchRequest(body, idempotencyHeader);
      // The run is the batch's, not an item's: a missing run answers once, for the whole batch. An ended run
      // still replays the calls it made (a batch resent after a lost answer); see the end of this method.
      run = await this.runs.snapshot(p, runId);
    } catch (err) {
      throw await this.calls.refusalAfterKeyCheck(p, err); // a revoked key is told so first, as for a single call
    }

    const bodies: (ToolCallBody | null)[] = toolUses.map(() => null);
    const refusals: (AppError | null)[] = toolUses.map(() => null);
    const limit = Math.min(READ_CONCURRENCY, this.config.VENDOR_CONCURRENCY_LIMIT);
    // Once an item is found still executing (the batch was sent again while its first post still runs), nothing
    // in a later group starts: the items after it are answered from the ledger, or 409, so a resend cannot put a
    // later write at the vendor beside (or ahead of) an earlier one. (It is known once its group has run: a read
    // run concurrently with it, in the same group of reads, may still start — it changes nothing.)
    let held = false;
    // Once a write has not run (waiting for approval, or refused with 429, 503, ... before its outcome was
    // recorded, or any item refused 422 IDEMPOTENCY_KEY_REUSED while the write first sent under its id has not run), no
    // write after it starts until a resend finds it run: run now, they would reach their vendors before it (reads
    // still do: they change nothing). An approval may take hours: the later writes answer 409 meanwhile.
    let writeHold: (() => AppError) | null = null;
    /** Items answered 409 only because a write before them has not run (not because their own call still runs). */
    const heldBehindWrite = new Set<number>();
    const kinds = toolUses.map((u) => this.kindOf(u));
    const item: Principal = { ...p, batchItem: true }; // its replays are charged as debt, never refused (KeyRateLimiter.chargeReplay)
    for (const group of scheduleBatch(kinds)) {
      const hold = held;
      const holdWrite = kinds[group[0]] === 'write' ? writeHold : null;
      await runBounded(group, limit, async (i) => {
        try {
          // A number the body reader could not represent: refused as the same body posted alone would be, before anything else.
          const unreadable = refusedBatchItem(toolUses[i]);
          if (unreadable) throw unreadable;
          const answer = this.stopping
            ? this.calls.replayOnly(item, run.id, toolUses[i], gatewayStopping)
            : hold
              ? this.calls.replayOnly(item, run.id, toolUses[i])
              : holdWrite
                ? this.calls.replayOnly(item, run.id, toolUses[i], () => (heldBehindWrite.add(i), holdWrite()))
                : this.calls.submit(item, run.id, toolUses[i], undefined, correlationId);
          bodies[i] = (await answer).body;
        } catch (err) {
          refusals[i] = this.refusal(err, i, correlationId);
        }
      });
      // A write held behind an unrun one holds nothing more than that one already does; one whose own
      // call still runs (a resend) holds everything after it, as always.
      held ||= group.some((i) => (refusals[i]?.code === 'IDEMPOTENCY_IN_PROGRESS' && !heldBehindWrite.has(i)) || STILL_EXECUTING.has(bodies[i]?.status ?? ''));
      writeHold ??= writeHoldOf(group, kinds, bodies, refusals, (toolName, action) => this.kindOfAction(toolName, action));
    }
    // Nothing in it was a call the run made before it ended: one 409 for the batch, as for a single call.
    if (endedRunOnly(bodies, refusals)) throw new AppError('RUN_NOT_ACTIVE', 'run is not active: it was completed or cancelled');
    if (revokedKeyOnly(bodies, refusals)) throw new AppError('UNAUTHENTICATED', 'a valid API key is required');
    const fitted = fitBatchBudget(bodies, this.config.BATCH_BUDGET_BYTES);
    return { results: fitted.map((b, i) => b ?? problemBody(withToolResult(refusals[i]!, echoableToolUseId(toolUses[i])), correlationId)) };
  }

  /** By the catalog's side effect; a write, an unknown tool or an unparseable item runs alone. */
  private kindOf(item: unknown): ScheduleKind {
    try {
      const use = parseToolUse(item);
      return typeof use.action === 'string' ? this.kindOfAction(use.name, use.action) : 'alone';
    } catch {
      return 'alone';
    }
  }

  /** A catalog action's kind by its side effect; one not in the catalog runs alone. */
  private kindOfAction(toolName: string, action: string): ScheduleKind {
    const effect = this.catalog.find(toolName, action)?.action.sideEffect;
    return effect === 'read' ? 'read' : effect === 'write' ? 'write' : 'alone';
  }

  private refusal(err: unknown, index: number, correlationId: string): AppError {
    const e = toAppError(err);
    if (e.code === 'INTERNAL') {
      // As the exception filter does for a single call: the stack to the log, nothing inside to the caller.
      this.log.error({ correlationId, index, err: loggableErrorWithStack(err) }, 'batch item failed unexpectedly');
    } else if (e.code === 'DATABASE_UNAVAILABLE') {
      this.log.warn({ correlationId, index, ...databaseCause(err) }, 'database unavailable');
    }
    return e;
  }
}
