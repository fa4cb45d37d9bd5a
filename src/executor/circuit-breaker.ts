export type BreakerState = 'closed' | 'open' | 'half_open';

/**
 * What tryAcquire hands a call it lets through; the call reports its outcome with it. The pass names the phase
 * the breaker was in: a report from an earlier phase (a call let through before the breaker opened, reporting
 * after it opened or went half-open) is stale and changes nothing, so it can neither free the half-open probe
 * slot while the probe is out nor push an open breaker's cooldown back.
 */
export interface BreakerPass {
  readonly generation: number;
  /** The one call a half-open breaker lets through: its verdict closes or reopens the breaker. */
  readonly probe: boolean;
}

/**
 * A consecutive-failure breaker with an injected clock. Closed: counts
 * consecutive failures, opens at the threshold. Open: refuses until the
 * cooldown has passed, then lets exactly one probe through (half-open); the
 * probe's outcome closes it or opens it again. State is per process.
 */
export class CircuitBreaker {
  private state: BreakerState = 'closed';
  private failures = 0;
  private openedAt = 0;
  private probeInFlight = false;
  /** Bumped when the breaker opens and when it goes half-open: the phase a pass belongs to. */
  private generation = 0;

  constructor(
    private readonly threshold: number,
    private readonly cooldownMs: number,
    private readonly now: () => number,
  ) {}

  get current(): BreakerState {
    if (this.state === 'open' && this.now() - this.openedAt >= this.cooldownMs) return 'half_open';
    return this.state;
  }

  /** Whether tryAcquire would refuse now (open within its cooldown, or its half-open probe out), without taking a pass. */
  get refusing(): boolean {
    const state = this.current;
    return state === 'open' || (state === 'half_open' && this.state === 'half_open' && this.probeInFlight);
  }

  /** May a call go out now (a pass), or not (null)? In half-open, exactly once until that probe reports back. */
  tryAcquire(): BreakerPass | null {
    if (this.state === 'closed') return { generation: this.generation, probe: false };
    if (this.state === 'open') {
      if (this.now() - this.openedAt < this.cooldownMs) return null;
      this.state = 'half_open';
      this.generation++;
      this.probeInFlight = false;
    }
    if (this.probeInFlight) return null;
    this.probeInFlight = true;
    return { generation: this.generation, probe: true };
  }

  /** True when this closed the breaker (its half-open probe succeeded): a change worth telling the operator. */
  onSuccess(pass: BreakerPass): boolean {
    if (this.stale(pass)) return false;
    const closed = this.state !== 'closed';
    this.state = 'closed';
    this.failures = 0;
    this.probeInFlight = false;
    return closed;
  }

  /** True when this opened the breaker (the threshold reached, or the half-open probe failed). */
  onFailure(pass: BreakerPass): boolean {
    if (this.stale(pass)) return false;
    if (this.state === 'half_open') {
      this.open();
      return true;
    }
    this.failures++;
    if (this.failures < this.threshold) return false;
    this.open();
    return true;
  }

  /** A call that neither proved nor disproved the vendor's health (e.g. a 404). True when it closed the breaker. */
  onNeutral(pass: BreakerPass): boolean {
    if (this.stale(pass)) return false;
    if (this.state === 'half_open') return this.onSuccess(pass);
    this.failures = 0;
    return false;
  }

  /**
   * A call the vendor refused for its rate limit (429, THROTTLED, QuotaExceeded) is neither a success nor a
   * failure: the consecutive-failure count stays as it is, and a half-open probe frees its slot without closing
   * the breaker. A vendor alternating 5xx and 429 is failing; were a 429 to reset the count, or to close the
   * breaker as a healthy answer would, such a vendor would keep the breaker closed forever.
   */
  onRateLimited(pass: BreakerPass): void {
    this.onAbandoned(pass);
  }

  /**
   * A call that ended without saying anything about the vendor (our own code
   * threw, or nothing reached it). The probe still has to give back the
   * half-open slot, or every later call would be refused forever.
   */
  onAbandoned(pass: BreakerPass): void {
    if (this.stale(pass)) return;
    this.probeInFlight = false;
  }

  private stale(pass: BreakerPass): boolean {
    return pass.generation !== this.generation;
  }

  private open(): void {
    this.state = 'open';
    this.generation++;
    this.openedAt = this.now();
    this.probeInFlight = false;
    this.failures = 0;
  }
}
