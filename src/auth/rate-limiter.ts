/** Buckets kept; past that the oldest is dropped. */
const MAX_BUCKETS = 100_000;

/**
 * Per-key token bucket: `rps` tokens per second, bursts up to twice that.
 * In-memory per process (each replica enforces its own share); documented.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly rps: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * Returns 0 when allowed (`cost` tokens spent), else the seconds to wait until the bucket holds them (nothing
   * spent). A cost above the burst passes once the bucket is full, and leaves it in debt by the rest: the key's
   * next requests wait until that is paid back, so a batch larger than the burst cannot buy more than the rate.
   */
  take(key: string, cost = 1): number {
    if (this.rps <= 0) return 0;
    const charge = Math.max(1, cost);
    const need = Math.min(charge, this.burst);
    let b = this.buckets.get(key);
    if (!b) {
      // Bound memory under key churn: the oldest bucket goes (it starts again full if its key comes back).
      if (this.buckets.size >= MAX_BUCKETS) this.buckets.delete(this.buckets.keys().next().value!);
      b = { tokens: this.burst, at: this.now() };
      this.buckets.set(key, b);
    }
    this.refill(b);
    if (b.tokens >= need) {
      b.tokens -= charge;
      return 0;
    }
    return this.secondsUntil(b, need);
  }

  /**
   * After take(): `cost` more tokens for work whose size is known only once the request is under way (a stored
   * result read back in full). Spent when the bucket holds them, or when it held a full burst before take() (the key
   * is then left in debt by the rest, as by a cost above the burst); else nothing more is spent and the seconds to
   * wait are returned: until the bucket holds the request's own token as well, which its retry spends again at take()
   * (waiting only for `cost`, a retry sent on time was one token short, and at 1 request/s refused every time).
   * A key with no bucket yet (limits off, or take() not called) pays nothing.
   */
  takeMore(key: string, cost: number): number {
    const b = cost > 0 ? this.refilled(key) : undefined;
    if (!b) return 0;
    const need = Math.min(cost, this.burst - 1);
    if (b.tokens >= need) {
      b.tokens -= cost;
      return 0;
    }
    return this.secondsUntil(b, need + 1);
  }

  /**
   * After take(): `cost` more tokens for work already admitted that is not refused for its size (a replay): spent
   * whatever the bucket holds, the key left in debt for the rest, which its next requests wait for.
   */
  owe(key: string, cost: number): void {
    const b = cost > 0 ? this.refilled(key) : undefined;
    if (b) b.tokens -= cost;
  }

  /**
   * Seconds until a key in debt (its bucket below zero) has paid it back and holds the token its retry spends again
   * at take(); 0 when it is not in debt. (Until it was back at zero only, a retry sent on time was refused again.)
   */
  debtWait(key: string): number {
    const b = this.refilled(key);
    return b && b.tokens < 0 ? this.secondsUntil(b, 1) : 0;
  }

  private get burst(): number {
    return this.rps * 2;
  }

  /** The key's bucket refilled to now; none with the limit off or for a key take() never saw. */
  private refilled(key: string): { tokens: number; at: number } | undefined {
    if (this.rps <= 0) return undefined;
    const b = this.buckets.get(key);
    if (b) this.refill(b);
    return b;
  }

  private refill(b: { tokens: number; at: number }): void {
    const t = this.now();
    // Never emptied by time going back (a test's Clock.advance(-ms)): the bucket then just waits for it again.
    b.tokens = Math.min(this.burst, b.tokens + (Math.max(0, t - b.at) / 1000) * this.rps);
    b.at = t;
  }

  /** Whole seconds (at least 1) until the bucket holds `need` tokens. */
  private secondsUntil(b: { tokens: number }, need: number): number {
    return Math.max(1, Math.ceil((need - b.tokens) / this.rps));
  }

  /** Gives back a token take() spent (the work it paid for turned out not to count). */
  refund(key: string): void {
    const b = this.buckets.get(key);
    if (b) b.tokens = Math.min(this.burst, b.tokens + 1);
  }
}
