import { Inject, Injectable } from '@nestjs/common';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { RateLimiter } from './rate-limiter.js';

/**
 * RATE_LIMIT_RPS per API key, shared by the AuthGuard (a token per request, or a batch's cost) and the routes whose
 * cost is known only once they run (a stored result read back in full, or for a replay, a ledger list page or export: RESULT_BYTES_PER_TOKEN).
 * Buckets refill on the Clock's monotonic reading (elapsedMs): a stepped host clock does not move it, and a test
 * moves it with advance() rather than sleeping while they refill.
 */
@Injectable()
export class KeyRateLimiter extends RateLimiter {
  constructor(@Inject(APP_CONFIG) config: AppConfig, clock: Clock) {
    super(config.RATE_LIMIT_RPS, () => clock.elapsedMs());
  }

  /**
   * A stored result of `bytes` about to be read back and decrypted for `keyId` (null: none is stored): a token per
   * RESULT_BYTES_PER_TOKEN beyond the first, the first paid by the request itself. One the key cannot pay for now is
   * 429 RATE_LIMITED with Retry-After, before anything is decrypted.
   */
  chargeResultRead(keyId: string, bytes: number | null): void {
    const extra = resultReadCost(bytes);
    const wait = this.takeMore(keyId, extra);
    if (wait > 0) throw new AppError('RATE_LIMITED', `rate limit exceeded for this API key (a result of ${bytes} bytes costs ${extra + 1} requests)`, { retryAfterSeconds: wait });
  }

  /**
   * A replay (the same tool_use sent again) of a succeeded call whose stored result is `bytes` large, before it is
   * decrypted: never refused for its own size — a batch has spent a token per tool_use already, and a replay refused
   * there for its size would be refused on every resend, the writes after it held for good — but charged all the
   * same, as debt its next requests wait for. A replay sent alone while the key is in debt already (concurrent
   * replays of a large result: the first put it there) is 429 RATE_LIMITED, nothing decrypted; a batch's item is not
   * (the batch's size bounds it, and its first item's debt would refuse the others on every resend).
   */
  chargeReplay(keyId: string, bytes: number | null, batchItem = false): void {
    const cost = resultReadCost(bytes);
    if (cost === 0) return;
    if (!batchItem) {
      const wait = this.debtWait(keyId);
      if (wait > 0) throw new AppError('RATE_LIMITED', `rate limit exceeded for this API key (it owes for a large result read back, and this replay's result of ${bytes} bytes costs ${cost + 1} requests)`, { retryAfterSeconds: wait });
    }
    this.owe(keyId, cost);
  }

  /** Per key with a listing being built: the end of its queue of turns (listingTurn). */
  private readonly listingTurns = new Map<string, Promise<void>>();

  /**
   * Reads a ledger listing's page, or an export's first batch, in the key's turn, and charges it by the `bytes` it
   * sends (chargeListing): one at a time per key, a key's other pages waiting, with no database work, for the one
   * before. One whose turn comes while the key owes for the page before it is 429 RATE_LIMITED before anything is read.
   * Before, a key's burst of concurrent large pages was every one read and parsed before the first was charged (the
   * others refused only then): one org's 20 pages of 6 MB at once held another org's calls for 620–940 ms instead of 8–18.
   */
  async listingTurn<T>(keyId: string, what: string, read: () => Promise<T>, bytes: (page: T) => number): Promise<T> {
    const before = this.listingTurns.get(keyId) ?? Promise.resolve();
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    const tail = before.then(() => mine);
    this.listingTurns.set(keyId, tail);
    try {
      await before;
      const wait = this.debtWait(keyId);
      if (wait > 0) throw new AppError('RATE_LIMITED', `rate limit exceeded for this API key (it owes for a large read already; this ${what} was not read)`, { retryAfterSeconds: wait });
      const page = await read();
      this.chargeListing(keyId, bytes(page), what);
      return page;
    } finally {
      done();
      if (this.listingTurns.get(keyId) === tail) this.listingTurns.delete(keyId);
    }
  }

  /**
   * A ledger listing of `bytes` built for `keyId` (a list page, or an export's first batch), before anything of it is
   * sent: charged as a replay is, a token per RESULT_BYTES_PER_TOKEN beyond the first, as debt its next requests
   * wait for — never refused for its own size (its rows are read already; a page larger than the burst would be
   * refused on every resend) — unless the key is in debt already (concurrent large pages: the first put it there):
   * then 429 RATE_LIMITED, nothing sent, with a Retry-After that a retry sent on time is admitted at.
   */
  chargeListing(keyId: string, bytes: number, what: string): void {
    const cost = resultReadCost(bytes);
    if (cost === 0) return;
    const wait = this.debtWait(keyId);
    if (wait > 0) throw new AppError('RATE_LIMITED', `rate limit exceeded for this API key (it owes for a large read already, and this ${what} of ${bytes} bytes costs ${cost + 1} requests)`, { retryAfterSeconds: wait });
    this.owe(keyId, cost);
  }
}

/** The tokens a stored result of `bytes` costs beyond the request's own (null: none is stored). */
const resultReadCost = (bytes: number | null): number => (bytes === null ? 0 : Math.floor(bytes / RESULT_BYTES_PER_TOKEN));

/**
 * A stored result read back in full costs a token per this many bytes beyond the first: decrypting, parsing and
 * sending a 5 MB result is some hundred small requests' work, and its answer waits in memory for a slow client.
 */
export const RESULT_BYTES_PER_TOKEN = 64 * 1024;
