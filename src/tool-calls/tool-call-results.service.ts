import { Injectable, type BeforeApplicationShutdown } from '@nestjs/common';
import { reachesRun, type Principal } from '../auth/principal.js';
import { KeyRateLimiter } from '../auth/key-rate-limiter.js';
import { Clock } from '../common/clock.js';
import { sharedAbortController } from '../common/shared-abort.js';
import { AppError } from '../common/errors/app-error.js';
import { isUuid } from '../common/ids.js';
import { Sql } from '../db/sql.js';
import { settledCalls, STORED_CALL_COLUMNS, ToolCallsService, type StoredCall, type ToolCallResponse } from './tool-calls.service.js';

const MAX_WAIT_MS = 30_000;
/** How often one statement looks for settles of every call a long-poll waits on (settled on another replica). */
const POLL_MS = 200;
/** Ids per look-up statement: thousands of open long-polls are a few statements a tick, not one each. */
const POLL_CHUNK = 5_000;
const PENDING = new Set(['requested', 'waiting_approval', 'approved', 'running']);
const PENDING_LIST = [...PENDING];

/**
 * GET /v1/tool-calls/:id/result: the tool-call body whatever the status, with
 * the full result while it is kept. `waitMs` long-polls until the call settles:
 * woken at once by a settle in this process, and for other replicas' by one
 * statement every POLL_MS that looks up every call a long-poll waits on — not a
 * read per long-poll per tick, which with a few thousand open (agents waiting
 * for approvals, as the README tells them to) filled the pool and made every
 * other request wait for a connection, then answer 503.
 */
@Injectable()
export class ToolCallResultsService implements BeforeApplicationShutdown {
  /** Aborted when the gateway starts shutting down: a long-poll must not hold the HTTP drain for up to 30 s. */
  private readonly closing = sharedAbortController();
  /** The open long-polls, by the call they wait on: each entry wakes one. */
  private readonly waiters = new Map<string, Set<() => void>>();
  private pollTimer: NodeJS.Timeout | null = null;
  private readonly onSettled = (id: string): void => this.wake(id);

  constructor(
    private readonly sql: Sql,
    private readonly calls: ToolCallsService,
    private readonly clock: Clock,
    private readonly limiter: KeyRateLimiter,
  ) {
    settledCalls.on('settled', this.onSettled);
  }

  /** Every open long-poll answers now, with the call's current state (the agent polls again, on another replica). */
  beforeApplicationShutdown(): void {
    this.answerWaiting();
  }

  /**
   * Answers every open long-poll now, with the call as it stands, and takes no new wait (README "Stopping"): from
   * the drain's start (beginHttpDrain), so no shutdown hook that runs before this one (the approvals sweep finishing
   * its batch) holds them. Idempotent.
   */
  answerWaiting(): void {
    this.closing.abort();
    settledCalls.off('settled', this.onSettled);
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = null;
  }

  /** Open long-polls waiting on `id` (or on any call): what a test waits for before it changes the call. */
  waitingOn(id?: string): number {
    if (id !== undefined) return this.waiters.get(id)?.size ?? 0;
    let n = 0;
    for (const set of this.waiters.values()) n += set.size;
    return n;
  }

  /** `clientGone` aborts the long-poll (the client went away): no more waiting, no more reads. */
  async get(p: Principal, id: string, waitMsRaw: string | undefined, clientGone?: AbortSignal): Promise<ToolCallResponse> {
    // Either ends the wait: the client going away, or the gateway shutting down. Listeners are removed
    // when this request ends (no AbortSignal.any: it would tie every poll to the long-lived one).
    const stop = new AbortController();
    const abort = (): void => stop.abort();
    clientGone?.addEventListener('abort', abort, { once: true });
    this.closing.signal.addEventListener('abort', abort, { once: true });
    if (clientGone?.aborted || this.closing.signal.aborted) stop.abort();
    try {
      return await this.answer(p, id, waitMsRaw, stop.signal);
    } finally {
      clientGone?.removeEventListener('abort', abort);
      this.closing.signal.removeEventListener('abort', abort);
    }
  }

  private async answer(p: Principal, id: string, waitMsRaw: string | undefined, signal: AbortSignal): Promise<ToolCallResponse> {
    let waitMs = 0;
    if (waitMsRaw !== undefined) {
      if (!/^\d{1,6}$/.test(waitMsRaw) || Number(waitMsRaw) > MAX_WAIT_MS) throw new AppError('VALIDATION_FAILED', `waitMs: an integer from 0 to ${MAX_WAIT_MS}`);
      waitMs = Number(waitMsRaw);
    }
    // The wait counts from the request's start (at most MAX_WAIT_MS in all, the first read included), not from after
    // the first read.
    const deadline = performance.now() + waitMs;
    let row = await this.load(p, id);
    while (PENDING.has(row.status) && performance.now() < deadline && !signal?.aborted) {
      // Read again once the call settles (here, or on another replica: the shared look-up), once its approval is past
      // expiry (the look-up finds that too; the next load writes it down), or at the deadline. A key revoked meanwhile
      // gets its 401 at that read.
      await this.waitForSettle(row.id, deadline - performance.now(), signal); // its id as stored: lower case
      if (signal?.aborted) break; // still pending: the answer below reads nothing more (no one is listening)
      row = await this.load(p, id);
    }
    // A full result costs the key a token per RESULT_BYTES_PER_TOKEN beyond the first, taken before it is decrypted: a
    // key within RATE_LIMIT_RPS could otherwise have the process decrypt, parse and send megabytes many times a second,
    // the other orgs' calls waiting behind it.
    if (row.status === 'succeeded') this.limiter.chargeResultRead(p.keyId, row.result_bytes);
    // API.md "Reading a result": 200 whatever the call's status — the status is in the body. A long-poll
    // that worked is not a failed request, even when the call it reports was blocked or refused.
    // The whole result, and the model-facing content within the result budget, as every other answer gives it: an
    // agent passing on the toolResult of a long-poll (an approved call's outcome) must not hand the model megabytes.
    const answer = await this.calls.answerStored(row, row.tool_use_id, false, true);
    return { ...answer, httpStatus: 200 };
  }

  /**
   * The call as it stands, read with the caller's key: the guard checked the key once, when the request came,
   * and a long-poll then reads for up to 30 s. A key revoked meanwhile (here or on another replica) gets its
   * 401 at the next read, not the result the call settles with.
   */
  private async load(p: Principal, id: string): Promise<StoredCall> {
    if (!isUuid(id)) throw new AppError('NOT_FOUND', 'tool call not found');
    // The run's creator comes in the same statement: a call of a run the key does not reach (another org's, or to
    // an agent key another key's run) is 404 like a missing one (reachesRun).
    const [found] = await this.sql.query<StoredCall & { key_live: boolean; run_created_by: string | null }>(
      `SELECT ${STORED_CALL_COLUMNS}, EXISTS (SELECT 1 FROM api_keys k WHERE k.id = $2 AND k.revoked_at IS NULL) AS key_live,
              (SELECT r.created_by FROM agent_runs r WHERE r.id = t.run_id) AS run_created_by
         FROM tool_calls t WHERE t.id = $1`,
      [id, p.keyId],
    );
    if (!found || !reachesRun(p, { orgId: found.org_id, createdBy: found.run_created_by })) throw new AppError('NOT_FOUND', 'tool call not found');
    const { key_live: keyLive, run_created_by: _runCreatedBy, ...row } = found;
    if (!keyLive) throw new AppError('UNAUTHENTICATED', 'a valid API key is required');
    // An approval past its expiry ends the call now (blocked / APPROVAL_EXPIRED), not at the next sweep.
    return this.calls.expireIfOverdue(row);
  }

  /** Until the call settles (seen here or by the shared look-up), `ms` pass, or `signal` aborts; leaves no timer or waiter behind. */
  private waitForSettle(id: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      let set = this.waiters.get(id);
      if (!set) this.waiters.set(id, (set = new Set()));
      const waiting = set;
      const finish = (): void => {
        clearTimeout(timer);
        waiting.delete(finish);
        if (waiting.size === 0 && this.waiters.get(id) === waiting) this.waiters.delete(id);
        signal?.removeEventListener('abort', finish);
        resolve();
      };
      const timer = setTimeout(finish, Math.max(0, ms));
      waiting.add(finish);
      signal?.addEventListener('abort', finish, { once: true });
      this.schedulePoll();
    });
  }

  private wake(id: string): void {
    const set = this.waiters.get(id);
    if (set) for (const finish of [...set]) finish();
  }

  private schedulePoll(): void {
    if (this.pollTimer || this.waiters.size === 0 || this.closing.signal.aborted) return;
    this.pollTimer = setTimeout(() => void this.poll(), POLL_MS);
    this.pollTimer.unref();
  }

  /** One look-up for every call waited on: the settled (or expired) ones wake their long-polls, which read them with their own key. */
  private async poll(): Promise<void> {
    try {
      const ids = [...this.waiters.keys()];
      for (let i = 0; i < ids.length; i += POLL_CHUNK) {
        // Settled, or waiting for an approval past its expiry on the gateway's clock (the woken long-poll's read
        // writes the expiry down, as every read does).
        const settled = await this.sql.query<{ id: string }>(
          `SELECT t.id FROM tool_calls t WHERE t.id = ANY($1::uuid[])
              AND (t.status <> ALL($2::text[])
                   OR (t.status = 'waiting_approval' AND EXISTS (
                         SELECT 1 FROM approval_requests a WHERE a.tool_call_id = t.id AND a.status = 'pending' AND a.expires_at <= $3)))`,
          [ids.slice(i, i + POLL_CHUNK), PENDING_LIST, this.clock.now()],
        );
        for (const r of settled) this.wake(r.id);
      }
    } catch {
      // The database is away: each long-poll reads again at its deadline (503 then, if it is still away).
    } finally {
      this.pollTimer = null;
      this.schedulePoll();
    }
  }
}
