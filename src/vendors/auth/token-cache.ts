/**
 * Per-credential access-token cache shared by the vendor handlers (LWA, Jumio).
 * Vendors rate-limit their token endpoints (Jumio: 10 req/s per tenant) and a
 * burst of tool calls must not turn into a burst of token requests, so:
 * - a token is reused until `expiresAt - refreshMargin` (Amazon's own SDK uses 60 s);
 * - inside the margin the token still works: it is handed out at once while a
 *   refresh runs in the background, so a slow or failing token endpoint costs
 *   the calls nothing until the real expiry; only a caller with no token, or
 *   an expired one, waits for the fetch;
 * - concurrent callers of one key share ONE in-flight fetch (single-flight);
 * - `invalidate` only drops the token the caller actually used, so 20 callers that
 *   all saw "expired" cause one refresh, not 20;
 * - a failed fetch is never cached: the next caller tries again (inside the
 *   margin the old, not yet expired token is used meanwhile);
 * - but a failed refresh in the margin is not started again before
 *   max(Retry-After, 1 s) (capped at the real expiry): without that wait every
 *   call in the margin would ask a rate-limited token endpoint once more, each as
 *   soon as the previous request failed;
 * - a token endpoint that answered 429 (or a 503 naming a wait) is not asked again
 *   for that key before max(Retry-After, 1 s), token or no token: until then a
 *   caller with no usable token is refused at once (rate_limited, retryAfterMs the
 *   wait left, nothing sent), rather than every new call asking an endpoint that
 *   asked for quiet (Jumio: 10 token requests/s per tenant). A token bought, an
 *   invalidated one, or the owner's credentials forgotten ends the wait;
 * - a token bought with credentials that were replaced or deleted since the call
 *   loaded them (GetTokenOptions.credentials) is not kept, and not handed out.
 */
import { createHash } from 'node:crypto';
import { setBounded } from '../../common/cache/bounded-map.js';
import type { FailedOutcome, VendorCallContext } from '../vendor-handler.js';

export interface FetchedToken {
  token: string;
  expiresInSec: number;
  /** A grant that rotates its refresh token (Shopify's expiring offline tokens) hands out the replacement here. */
  refreshToken?: string;
}

export type TokenFetcher = () => Promise<FetchedToken>;

export interface TokenCacheOptions {
  /** Refresh this long before the vendor's expiry (default 60 s). */
  refreshMarginMs?: number;
  /**
   * Injectable clock in ms (default performance.now()): only durations are measured with it (fetched at + expires_in),
   * so a wall clock stepped back (NTP) never keeps a dead token in use, nor one stepped forward drops a live one.
   */
  now?: () => number;
  /** Bound on cached credentials; the oldest entry goes first (default 10 000). */
  maxEntries?: number;
}

export interface AcquiredToken {
  token: string;
  /** true when this caller waited for a token request; false when it came from the cache */
  fresh: boolean;
}

export interface GetTokenOptions {
  /** Stop waiting (the shared fetch itself goes on and still fills the cache). */
  signal?: AbortSignal;
  /**
   * Whether the shared fetch is doing the gateway's own work right now (not calling the vendor): a wait the signal
   * ends then is the gateway's (`local`), which says nothing of the vendor's health and counts against no breaker.
   */
  waitIsLocal?: () => boolean;
  /**
   * Whose credentials the token is bought with (`<orgId>:<integration>`): forgetOwner drops it when they are deleted
   * or replaced, rather than it staying in memory for its whole lifetime (24 h for Shopify's).
   */
  owner?: string;
  /**
   * The call's credentials, loaded before this wait: whether they are still the org's. A token is neither bought,
   * handed out nor kept with credentials an admin's PUT or DELETE has moved on from (a call that loaded them before
   * the change and asks for its token after it).
   */
  credentials?: CredentialsCheck;
  /** The call's record of the tokens it is handed (VendorCallContext.tokensUsed): the one returned is added. */
  tokensUsed?: Set<string>;
  /**
   * Asked when this caller waited for a token request (the token is `fresh`), before the token is handed out: a
   * failure to answer with instead (thrown as a TokenFetchError). A token endpoint can take most of a call's budget:
   * the run ended or the org's kill switch thrown meanwhile (answered 200) must stop the send, as between attempts
   * (standingAfterTokenWait). Not asked for a cached token: nothing was waited for.
   */
  afterWait?: () => Promise<FailedOutcome | undefined>;
}

export interface CredentialsCheck {
  /** Synchronous: no change of the org's credentials answered in this process since the call loaded them. */
  current: () => boolean;
  /** Asked only when `current` says no: whether they really changed (a PUT of the same config did not); 'deleted' when they are gone. */
  changed: () => Promise<boolean | 'deleted'>;
}


/**
 * The call's credentials check (GetTokenOptions.credentials): the executor's note of a change seen in this process,
 * confirmed by the stored config's stamp (sendStanding) before a call is failed for it. None without the note.
 */
export function credentialsCheckOf(ctx: Pick<VendorCallContext, 'credentialsCurrent' | 'sendStanding'>): CredentialsCheck | undefined {
  const current = ctx.credentialsCurrent;
  if (!current) return undefined;
  const standing = ctx.sendStanding;
  return {
    current,
    changed: async () => {
      if (!standing) return true;
      const now = await standing();
      return now === 'credentials-deleted' ? 'deleted' : now === 'credentials-changed';
    },
  };
}

/** A token fetch that failed in a way the handler can hand straight back as its outcome. */
export class TokenFetchError extends Error {
  override readonly name = 'TokenFetchError';
  constructor(readonly outcome: FailedOutcome) {
    super(outcome.message);
  }
}

/** The least wait before another refresh in the margin after one failed (the vendor gave no longer Retry-After). */
export const REFRESH_RETRY_MIN_MS = 1_000;

/** A key's token endpoint asked for a wait (429, or a 503 naming one): no request for it before `until`. */
interface Blocked {
  until: number;
  outcome: FailedOutcome;
}

interface Entry {
  token: string;
  expiresAt: number;
  refreshAt: number;
  /** No refresh in the margin starts before this (a failed one's Retry-After or REFRESH_RETRY_MIN_MS). */
  retryAt: number;
}

/**
 * A cache key for one credential that holds no secret: vendors' client secrets and
 * refresh tokens would otherwise sit in heap dumps and debug output as map keys.
 */
export function tokenCacheKey(namespace: string, ...parts: string[]): string {
  // JSON keeps the parts unambiguous ("ab"+"c" differs from "a"+"bc").
  return `${namespace}:${createHash('sha256').update(JSON.stringify(parts)).digest('hex')}`;
}

export class TokenCache {
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<string>>();
  /** The cache keys each owner's calls used (GetTokenOptions.owner), bounded as the entries are. */
  private readonly owned = new Map<string, Set<string>>();
  /** Fetches under way whose credentials were forgotten meanwhile: their token is handed to their callers, not kept. */
  private readonly unwanted = new Set<string>();
  /** Keys whose token endpoint asked for a wait: no new token request for them before it is over. */
  private readonly blocked = new Map<string, Blocked>();
  private readonly marginMs: number;
  private readonly now: () => number;
  private readonly maxEntries: number;

  constructor(opts: TokenCacheOptions = {}) {
    this.marginMs = opts.refreshMarginMs ?? 60_000;
    this.now = opts.now ?? (() => performance.now());
    this.maxEntries = opts.maxEntries ?? 10_000;
  }

  async getToken(cacheKey: string, fetcher: TokenFetcher, opts: GetTokenOptions = {}): Promise<string> {
    return (await this.acquire(cacheKey, fetcher, opts)).token;
  }

  /**
   * Like getToken, and says whether the token was just issued (this caller
   * waited for a token request) or came from the cache. A vendor that refuses
   * a cached token may have revoked it early; one that refuses a fresh token
   * would refuse a second one too (VENDORS.md §2.5).
   */
  async acquire(cacheKey: string, fetcher: TokenFetcher, opts: GetTokenOptions = {}): Promise<AcquiredToken> {
    const acquired = await this.handOut(cacheKey, fetcher, opts);
    opts.tokensUsed?.add(acquired.token);
    return acquired;
  }

  /** acquire's work: the cached token, or one a (shared) token request issues. */
  private async handOut(cacheKey: string, fetcher: TokenFetcher, opts: GetTokenOptions): Promise<AcquiredToken> {
    const creds = opts.credentials;
    // Credentials replaced or deleted since the call loaded them (a DELETE answered 204 meanwhile): nothing is bought,
    // handed out or sent with them. Asked again (the database) only when this process saw a change: rare.
    if (creds && !creds.current()) {
      const moved = await creds.changed();
      if (moved) throw credentialsMovedOn(moved);
    }
    if (opts.owner !== undefined) this.own(opts.owner, cacheKey);
    let entry = this.entries.get(cacheKey);
    const now = this.now();
    if (entry && now < entry.refreshAt) return { token: entry.token, fresh: false };
    if (entry && now >= entry.expiresAt) {
      // Dead: not kept in memory past its own lifetime (a fetch follows, which stores the next one).
      this.entries.delete(cacheKey);
      entry = undefined;
    }
    let pending = this.inflight.get(cacheKey);
    const blocked = this.blockedAt(cacheKey, now);
    if (entry && now < entry.expiresAt) {
      // Refresh ahead, behind this call, unless one runs already or the last one failed too recently.
      // Nobody awaits this fetch here: a failure is dropped (not cached) and only delays the next try.
      if (!pending && now >= entry.retryAt && !blocked) {
        pending = this.start(cacheKey, fetcher, creds);
        pending.catch((err: unknown) => this.holdOffRefresh(cacheKey, entry, err));
      }
      return { token: entry.token, fresh: false };
    }
    // The call's budget already spent: it neither starts a token request nor joins one (a promise made here and left
    // would make the fetch's failure an unhandled rejection, which ends the process).
    if (opts.signal?.aborted) return Promise.reject(budgetSpent(opts.waitIsLocal));
    // The token endpoint asked for a wait that is not over: refused at once, nothing sent.
    if (!pending && blocked) return Promise.reject(heldOff(blocked.outcome, Math.ceil(blocked.until - now)));
    pending ??= this.start(cacheKey, fetcher, creds);
    const issued = pending.then(async (token): Promise<AcquiredToken> => {
      // Changed while this caller waited: the token is not handed out (the fetch did not keep it either).
      if (creds && !creds.current()) {
        const moved = await creds.changed();
        if (moved) throw credentialsMovedOn(moved);
      }
      const refusal = await opts.afterWait?.();
      if (refusal) throw new TokenFetchError(refusal);
      return { token, fresh: true };
    });
    return opts.signal ? raceAbort(issued, opts.signal, opts.waitIsLocal) : issued;
  }

  /** Drops the cached token only if it is still `token` (a newer one stays); a new one may then be asked for at once. */
  invalidate(cacheKey: string, token: string): void {
    if (this.entries.get(cacheKey)?.token !== token) return;
    this.entries.delete(cacheKey);
    this.blocked.delete(cacheKey);
  }

  clear(): void {
    this.entries.clear();
    this.blocked.clear();
  }

  /**
   * Drops the tokens bought with an owner's credentials (deleted or replaced: CredentialsService.onChange), and keeps
   * none a fetch under way for them brings back: a token the org's admin took away is not kept in this process.
   */
  forgetOwner(owner: string): void {
    const keys = this.owned.get(owner);
    if (!keys) return;
    this.owned.delete(owner);
    for (const key of keys) {
      this.drop(key);
      this.blocked.delete(key);
    }
  }

  /**
   * Notes that `owner`'s calls use `cacheKey`. Owner records are kept in last-use order and bounded as the entries
   * are; a record that makes room takes its tokens with it (and so does a key pushed out of a full record): a token
   * no owner record names could not be forgotten when its credentials are deleted.
   */
  private own(owner: string, cacheKey: string): void {
    let keys = this.owned.get(owner);
    if (keys) this.owned.delete(owner); // re-inserted below: Map order is last-use order
    else {
      keys = new Set();
      while (this.owned.size >= Math.max(1, this.maxEntries)) {
        const [oldest, oldKeys] = this.owned.entries().next().value as [string, Set<string>];
        this.owned.delete(oldest);
        for (const key of oldKeys) this.drop(key);
      }
    }
    this.owned.set(owner, keys);
    if (keys.has(cacheKey)) return;
    keys.add(cacheKey);
    if (keys.size > OWNED_KEYS_MAX) {
      const oldest = keys.values().next().value as string;
      keys.delete(oldest);
      this.drop(oldest);
    }
  }

  /** The key's token leaves the cache, and a fetch under way for it keeps none. */
  private drop(key: string): void {
    this.entries.delete(key);
    if (this.inflight.has(key)) this.unwanted.add(key);
  }

  /** The wait the key's token endpoint asked for, while it is not over. */
  private blockedAt(cacheKey: string, now: number): Blocked | undefined {
    const b = this.blocked.get(cacheKey);
    if (!b) return undefined;
    if (now < b.until) return b;
    this.blocked.delete(cacheKey);
    return undefined;
  }

  get size(): number {
    return this.entries.size;
  }

  private start(cacheKey: string, fetcher: TokenFetcher, creds?: CredentialsCheck): Promise<string> {
    const pending = this.fetchAndStore(cacheKey, fetcher, creds);
    this.inflight.set(cacheKey, pending);
    return pending;
  }

  /**
   * After a failed token request: a 429, or a 503 that names a wait, holds every new request for the key off for
   * max(Retry-After, 1 s) (a 429's default wait when it named none).
   */
  private blockOn(cacheKey: string, err: unknown): void {
    if (!(err instanceof TokenFetchError)) return;
    const o = err.outcome;
    const named = o.retryAfterIsDefault ? undefined : o.retryAfterMs;
    if (o.kind !== 'rate_limited' && !(o.kind === 'server_error' && o.vendorStatus === 503 && named !== undefined)) return;
    setBounded(this.blocked, cacheKey, { until: this.now() + Math.max(o.retryAfterMs ?? 0, REFRESH_RETRY_MIN_MS), outcome: o }, this.maxEntries);
  }

  /** After a failed refresh in the margin: no other one before the vendor's Retry-After (at least 1 s), nor past the expiry. */
  private holdOffRefresh(cacheKey: string, entry: Entry, err: unknown): void {
    // A token invalidated or replaced meanwhile is not this entry's any more: nothing to hold off.
    if (this.entries.get(cacheKey) !== entry) return;
    const retryAfterMs = err instanceof TokenFetchError ? (err.outcome.retryAfterMs ?? 0) : 0;
    entry.retryAt = Math.min(this.now() + Math.max(retryAfterMs, REFRESH_RETRY_MIN_MS), entry.expiresAt);
  }

  private async fetchAndStore(cacheKey: string, fetcher: TokenFetcher, creds?: CredentialsCheck): Promise<string> {
    try {
      const { token, expiresInSec } = await fetcher();
      this.blocked.delete(cacheKey);
      const lifetimeMs = Math.max(0, expiresInSec * 1000);
      const fetchedAt = this.now();
      // A token living shorter than twice the margin would be "stale" at once and
      // refetched on every call; refresh it at half its life instead.
      const margin = Math.min(this.marginMs, lifetimeMs / 2);
      // Its credentials were forgotten, or replaced or deleted since the call that started it loaded them.
      if (this.unwanted.delete(cacheKey) || creds?.current() === false) return token;
      this.entries.delete(cacheKey); // re-insert so Map order is age order for eviction
      this.entries.set(cacheKey, { token, expiresAt: fetchedAt + lifetimeMs, refreshAt: fetchedAt + lifetimeMs - margin, retryAt: 0 });
      if (this.entries.size > this.maxEntries) {
        const oldest = this.entries.keys().next().value;
        if (oldest !== undefined) this.entries.delete(oldest);
      }
      return token;
    } catch (err) {
      this.blockOn(cacheKey, err); // only the fetch's own failures (TokenFetchError) ask for a wait
      throw err;
    } finally {
      this.inflight.delete(cacheKey);
      this.unwanted.delete(cacheKey);
    }
  }
}

/** Cache keys remembered per owner: one per credential form its calls used (a few; more is a config changing often). */
const OWNED_KEYS_MAX = 16;

/**
 * A call refused while its key's token endpoint's wait is not over: the failure that asked for it, with the wait
 * left, and nothing sent now (no status: the vendor was not asked). Rate-limited whatever asked for the wait (a 429,
 * or a 503 naming one): this call is held off by a wait, not failed by the vendor, so it is VENDOR_RATE_LIMITED with
 * the wait left, and says nothing against the vendor's health (the 503 itself counted, once, for its own call).
 */
function heldOff(asked: FailedOutcome, leftMs: number): TokenFetchError {
  const { vendorStatus: _answered, ...outcome } = asked;
  return new TokenFetchError({
    ...outcome,
    kind: 'rate_limited',
    requestSent: false,
    retryAfterMs: leftMs,
    message: `${asked.message}; no token request is sent before the wait it asked for is over`,
  });
}

/**
 * The call's credentials were replaced or deleted while it was under way: nothing is sent with them. Deleted, the call
 * ends CREDENTIALS_NOT_FOUND (credentialsGone), as one started a moment later does.
 */
function credentialsMovedOn(how: true | 'deleted'): TokenFetchError {
  return new TokenFetchError({
    ok: false,
    kind: 'network',
    requestSent: false,
    local: true,
    ...(how === 'deleted' ? { credentialsGone: true as const } : {}),
    message: `the org's credentials were ${how === 'deleted' ? 'deleted' : 'replaced'} while this call was under way; nothing was sent with them`,
  });
}

/** The call's time budget ran out before it had a token. */
function budgetSpent(waitIsLocal?: () => boolean): TokenFetchError {
  return waitIsLocal?.()
    ? new TokenFetchError({
        ok: false,
        kind: 'timeout',
        requestSent: false,
        local: true,
        message: 'call time budget spent while the gateway renewed the access token (another replica holding the renewal, or its token store)',
      })
    : new TokenFetchError({
        ok: false,
        kind: 'timeout',
        requestSent: false,
        message: 'call time budget spent while waiting for an access token',
      });
}

/** `pending`, or the budget error once `signal` aborts (acquire answers a signal already aborted itself). */
function raceAbort<T>(pending: Promise<T>, signal: AbortSignal, waitIsLocal?: () => boolean): Promise<T> {
  const aborted = (): TokenFetchError => budgetSpent(waitIsLocal);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(aborted());
    signal.addEventListener('abort', onAbort, { once: true });
    pending.then(
      (t) => {
        signal.removeEventListener('abort', onAbort);
        resolve(t);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}
