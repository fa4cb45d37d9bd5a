/**
 * In-flight vendor calls per org × vendor, per process. `acquire` never waits: full means "come back later".
 *
 * An approved call that found its org × vendor full reserves the next free slot (reserve): until it takes one, or the
 * reservation lapses, new calls are refused, so the slots drain and the next sweep's attempt finds one. Without it a
 * human-approved write waited behind the org's direct calls for as long as they kept coming, each taking the slot the
 * moment it was given back while the approved call looked again only every few seconds.
 */
export class ConcurrencyLeases {
  private readonly inFlight = new Map<string, number>();
  /** Org × vendor keys an approved call waits on, with when the reservation lapses (monotonic ms). */
  private readonly reserved = new Map<string, number>();

  constructor(
    private readonly limit: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * A release function, or null when the limit is reached, or when an approved call has reserved the next free slot
   * and this is not one (`approved`). An approved call that takes a slot ends the reservation.
   */
  acquire(key: string, approved = false): (() => void) | null {
    const until = this.reserved.get(key);
    if (until !== undefined && !approved) {
      if (this.now() < until) return null;
      this.reserved.delete(key);
    }
    const n = this.inFlight.get(key) ?? 0;
    if (n >= this.limit) return null;
    if (approved) this.reserved.delete(key);
    this.inFlight.set(key, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.inFlight.get(key) ?? 1) - 1;
      if (left <= 0) this.inFlight.delete(key);
      else this.inFlight.set(key, left);
    };
  }

  /** An approved call found `key` full: new calls are refused for up to `forMs`, until an approved call takes a slot. */
  reserve(key: string, forMs: number): void {
    this.reserved.set(key, this.now() + forMs);
  }

  count(key: string): number {
    return this.inFlight.get(key) ?? 0;
  }
}
