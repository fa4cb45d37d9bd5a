import { setBounded } from './bounded-map.js';

/**
 * A per-key TTL cache for hot-path reads whose invalidation cannot be undone
 * by a read that was already in flight.
 *
 * The race it closes: a miss starts a database read; an admin's write commits
 * and calls `invalidate(key)`; the read, which saw the row as it was before
 * the commit, finishes afterwards. A plain Map would now store the old value
 * for another TTL, so a change that was already answered 200 is not in force
 * on this replica.
 *
 * Every load carries a token. `invalidate` deletes the entry and marks the
 * key's in-flight load (if any) stale and forgets it, so:
 *  - a stale load never stores its result (its own callers, who asked before
 *    the invalidation, still get it: they were concurrent with the write);
 *  - a caller arriving after `invalidate` returned never joins the stale load,
 *    it starts a fresh one (single-flight is per generation, not per key).
 *
 * Writers must call `invalidate` after their transaction has committed (a read
 * that starts before the commit but after an earlier invalidation would
 * otherwise be cached), and also when the commit fails (it may have committed
 * anyway). `invalidate` is synchronous, so calling it before answering the
 * request is enough for the change to apply at once on this replica.
 *
 * The TTL is counted from when the read started, so no value is served more
 * than `ttlMs` after the database was asked (the cross-replica bound).
 */
export interface InvalidatingCacheOptions<V> {
  ttlMs: number;
  /** Entries kept at most; at the bound, the one stored longest ago makes room (setBounded). */
  maxEntries?: number;
  /** Results for which this returns false are handed back but not stored. */
  cacheable?: (value: V) => boolean;
  /** Monotonic milliseconds; tests may inject a clock. */
  now?: () => number;
}

interface Flight<V> {
  current: boolean;
  promise: Promise<V>;
  /** when the database was asked (now()), for the joining bound */
  startedAt: number;
}

export class InvalidatingCache<K, V> {
  private readonly entries = new Map<K, { value: V; until: number }>();
  private readonly flights = new Map<K, Flight<V>>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly cacheable: (value: V) => boolean;
  private readonly now: () => number;

  constructor(opts: InvalidatingCacheOptions<V>) {
    this.ttlMs = opts.ttlMs;
    this.maxEntries = opts.maxEntries ?? 50_000;
    this.cacheable = opts.cacheable ?? (() => true);
    this.now = opts.now ?? (() => performance.now());
  }

  /** The cached value, the in-flight load of the current generation, or a new load. */
  get(key: K, load: () => Promise<V>): Promise<V> {
    const startedAt = this.now();
    const hit = this.entries.get(key);
    if (hit && hit.until > startedAt) return Promise.resolve(hit.value);
    // A load in flight is joined only while it is young enough to serve: what the database answered more than
    // ttlMs ago is as stale as an expired entry (a slow read on a busy database would otherwise stretch the bound).
    const joined = this.flights.get(key);
    if (joined && startedAt - joined.startedAt < this.ttlMs) return joined.promise;
    if (joined) joined.current = false;

    let loading: Promise<V>;
    try {
      loading = load();
    } catch (err) {
      loading = Promise.reject(err as Error);
    }
    const flight: Flight<V> = { current: true, promise: loading, startedAt };
    flight.promise = loading.then(
      (value) => {
        if (this.flights.get(key) === flight) this.flights.delete(key);
        if (flight.current && this.cacheable(value)) {
          setBounded(this.entries, key, { value, until: startedAt + this.ttlMs }, this.maxEntries);
        }
        return value;
      },
      (err: unknown) => {
        if (this.flights.get(key) === flight) this.flights.delete(key);
        throw err;
      },
    );
    this.flights.set(key, flight);
    return flight.promise;
  }

  /** Forgets the key's value and disowns any load of it already in flight. */
  invalidate(key: K): void {
    this.entries.delete(key);
    const flight = this.flights.get(key);
    if (flight) {
      flight.current = false;
      this.flights.delete(key);
    }
  }

  clear(): void {
    this.entries.clear();
    for (const flight of this.flights.values()) flight.current = false;
    this.flights.clear();
  }
}
