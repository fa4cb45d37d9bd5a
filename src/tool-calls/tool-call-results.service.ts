import { setMaxListeners } from 'node:events';
import { Injectable, type BeforeApplicationShutdown } from '@nestjs/common';
import type { Principal } from '../auth/principal.js';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { isUuid } from '../common/ids.js';
import { Sql } from '../db/sql.js';
import { settledCalls, STORED_CALL_COLUMNS, ToolCallsService, type StoredCall, type ToolCallResponse } from './tool-calls.service.js';

const MAX_WAIT_MS = 30_000;
const POLL_MS = 200;
const PENDING = new Set(['requested', 'waiting_approval', 'approved', 'running']);

/**
 * GET /v1/tool-calls/:id/result: the tool-call body whatever the status, with
 * the full result while it is kept. `waitMs` long-polls until the call settles:
 * woken at once by a settle in this process, and by polling for other replicas.
 */
@Injectable()
export class ToolCallResultsService implements BeforeApplicationShutdown {
  /** Aborted when the gateway starts shutting down: a long-poll must not hold the HTTP drain for up to 30 s. */
  private readonly closing = new AbortController();

  constructor(
    private readonly sql: Sql,
    private readonly calls: ToolCallsService,
    private readonly clock: Clock,
  ) {
    setMaxListeners(0, this.closing.signal); // one listener per open long-poll, removed when it ends
  }

  /** Every open long-poll answers now, with the call's current state (the agent polls again, on another replica). */
  beforeApplicationShutdown(): void {
    this.closing.abort();
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
    let row = await this.load(p, id);
    const deadline = performance.now() + waitMs;
    while (PENDING.has(row.status) && performance.now() < deadline && !signal?.aborted) {
      // Waiting for an approval: woken when it expires too, which the next load writes down.
      const untilExpiry = row.approval_expires_at ? row.approval_expires_at.getTime() - this.clock.nowMs() : 0;
      await this.waitForSettle(id, Math.min(POLL_MS, deadline - performance.now(), untilExpiry > 0 ? untilExpiry : POLL_MS), signal);
      if (signal?.aborted) break; // still pending: the answer below reads nothing more (no one is listening)
      row = await this.load(p, id);
    }
    // API.md "Reading a result": 200 whatever the call's status — the status is in the body. A long-poll
    // that worked is not a failed request, even when the call it reports was blocked or refused.
    const answer = await this.calls.answerStored(row, row.tool_use_id, false, Number.POSITIVE_INFINITY);
    return { ...answer, httpStatus: 200 };
  }

  /**
   * The call as it stands, read with the caller's key: the guard checked the key once, when the request came,
   * and a long-poll then reads for up to 30 s. A key revoked meanwhile (here or on another replica) gets its
   * 401 at the next read, not the result the call settles with.
   */
  private async load(p: Principal, id: string): Promise<StoredCall> {
    if (!isUuid(id)) throw new AppError('NOT_FOUND', 'tool call not found');
    const [found] = await this.sql.query<StoredCall & { key_live: boolean }>(
      `SELECT ${STORED_CALL_COLUMNS}, EXISTS (SELECT 1 FROM api_keys k WHERE k.id = $2 AND k.revoked_at IS NULL) AS key_live
         FROM tool_calls t WHERE t.id = $1`,
      [id, p.keyId],
    );
    if (!found || (p.orgId !== null && found.org_id !== p.orgId)) throw new AppError('NOT_FOUND', 'tool call not found');
    const { key_live: keyLive, ...row } = found;
    if (!keyLive) throw new AppError('UNAUTHENTICATED', 'a valid API key is required');
    // An approval past its expiry ends the call now (blocked / APPROVAL_EXPIRED), not at the next sweep.
    return this.calls.expireIfOverdue(row);
  }

  /** Until the call settles in this process, `ms` pass, or `signal` aborts; leaves no timer or listener behind. */
  private waitForSettle(id: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const done = (settledId: string) => {
        if (settledId !== id) return;
        finish();
      };
      const timer = setTimeout(() => finish(), Math.max(0, ms));
      const finish = () => {
        clearTimeout(timer);
        settledCalls.off('settled', done);
        signal?.removeEventListener('abort', finish);
        resolve();
      };
      settledCalls.on('settled', done);
      signal?.addEventListener('abort', finish, { once: true });
    });
  }
}
