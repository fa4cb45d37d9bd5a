/**
 * Retrying a write the database refused as unavailable (a restart, a failover,
 * a dropped connection). Used for the outcome of an executed call: the vendor
 * has acted, so giving up on the write at the first refusal would lose what it
 * answered and leave the call `running` until the orphan sweep makes it
 * `indeterminate`. Also for a call's intent, and for giving back the leases of
 * refunds and token renewals (LEASE_RELEASE_RETRY).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { isDatabaseUnavailable } from './database-errors.js';

/** 100 ms, doubling, at most `capMs`. */
export function unavailableRetryDelayMs(attempt: number, capMs: number): number {
  return Math.min(capMs, 100 * 2 ** Math.min(attempt, 20));
}

export interface UnavailableRetry {
  /** No new attempt starts once this much time has passed since the first. */
  budgetMs: number;
  /** The longest wait between two attempts. */
  capMs: number;
  /** Stops the waiting (shutdown): the last error is thrown. */
  signal?: AbortSignal;
}

/** Giving back a lease (a refund's, a token renewal's) through a short outage: 3 s at most, the lease's expiry the last resort. */
export const LEASE_RELEASE_RETRY: UnavailableRetry = { budgetMs: 3_000, capMs: 500 };

/**
 * Calls `write` until it resolves. Rethrows at once an error that is not
 * "database unavailable" (retrying cannot help), and the last error when the
 * budget is spent or the signal aborts.
 */
export async function retryWhileUnavailable<T>(write: () => Promise<T>, o: UnavailableRetry): Promise<T> {
  const t0 = performance.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (!isDatabaseUnavailable(err) || o.signal?.aborted) throw err;
      const wait = unavailableRetryDelayMs(attempt, o.capMs);
      if (performance.now() - t0 + wait > o.budgetMs) throw err;
      try {
        await sleep(wait, undefined, o.signal ? { signal: o.signal } : undefined);
      } catch {
        throw err; // aborted while waiting
      }
    }
  }
}

/**
 * A write guarded by "only if not settled yet", made safe to resend after a
 * connection lost mid-statement: the statement may have committed with its
 * answer lost, and the resend's guard then finds the row settled (false).
 * Once an attempt was interrupted, such a false is checked with `isMine` (did
 * the row get OUR outcome?) instead of being taken for "settled elsewhere".
 */
export function resumableWrite(write: () => Promise<boolean>, isMine: () => Promise<boolean>): () => Promise<boolean> {
  let interrupted = false;
  return async () => {
    try {
      if (await write()) return true;
    } catch (err) {
      if (isDatabaseUnavailable(err)) interrupted = true;
      throw err;
    }
    return interrupted ? isMine() : false;
  };
}
