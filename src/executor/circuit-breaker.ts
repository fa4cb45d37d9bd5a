export type BreakerState = 'closed' | 'open' | 'half_open';

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

  constructor(
    private readonly threshold: number,
    private readonly cooldownMs: number,
    private readonly now: () => number,
  ) {}

  get current(): BreakerState {
    if (this.state === 'open' && this.now() - this.openedAt >= this.cooldownMs) return 'half_open';
    return this.state;
  }

  /** May a call go out now? In half-open, true exactly once until that probe reports back. */
  tryAcquire(): boolean {
    if (this.state === 'closed') return true;
    if (this.state === 'open') {
      if (this.now() - this.openedAt < this.cooldownMs) return false;
      this.state = 'half_open';
      this.probeInFlight = false;
    }
    if (this.probeInFlight) return false;
    this.probeInFlight = true;
    return true;
  }

  onSuccess(): void {
    this.state = 'closed';
    this.failures = 0;
    this.probeInFlight = false;
  }

  onFailure(): void {
    if (this.state === 'half_open') {
      this.open();
      return;
    }
    this.failures++;
    if (this.failures >= this.threshold) this.open();
  }

  /** A call that neither proved nor disproved the vendor's health (e.g. a 404). */
  onNeutral(): void {
    if (this.state === 'half_open') this.onSuccess();
    else this.failures = 0;
  }

  /**
   * A call that ended without saying anything about the vendor (our own code
   * threw). It still has to give back the half-open probe slot, or every later
   * call would be refused forever.
   */
  onAbandoned(): void {
    this.probeInFlight = false;
  }

  private open(): void {
    this.state = 'open';
    this.openedAt = this.now();
    this.probeInFlight = false;
    this.failures = 0;
  }
}
