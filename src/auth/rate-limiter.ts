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

  /** Returns 0 when allowed, else the seconds to wait before the next token. */
  take(key: string): number {
    if (this.rps <= 0) return 0;
    const burst = this.rps * 2;
    const t = this.now();
    const b = this.buckets.get(key) ?? { tokens: burst, at: t };
    b.tokens = Math.min(burst, b.tokens + ((t - b.at) / 1000) * this.rps);
    b.at = t;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      this.buckets.set(key, b);
      return 0;
    }
    this.buckets.set(key, b);
    if (this.buckets.size > 100_000) this.buckets.clear(); // bound memory under key churn
    return Math.max(1, Math.ceil((1 - b.tokens) / this.rps));
  }
}
