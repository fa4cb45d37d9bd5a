/**
 * In-flight vendor calls per org × vendor, per process. `acquire` never waits: full means "come back later".
 *
 * An approved call that found its org × vendor full reserves the next free slot (reserve): until it takes one, or the
 * reservation lapses, new calls are refused, so the slots drain and the next sweep's attempt finds one. Without it a
 * human-approved write waited behind the org's direct calls for as long as they kept coming, each taking the slot the
 * moment it was given back while the approved call looked again only every few seconds. A reservation names the
 * calls it is kept for: once none of them is still waiting (settled otherwise — its run ended — or taken by another
 * replica), it is dropped (unreserve), not left refusing the org's calls until it lapses.
 */
export class ConcurrencyLeases {
  private readonly inFlight = new Map<string, number>();
  /** Org × vendor keys approved calls wait on: when the reservation lapses (monotonic ms), and the calls it is kept for. */
  private readonly reserved = new Map<string, { until: number; holders: Set<string> }>();
  /** What wakes each waiting approved call when a slot it may take is given back (reserve's `wake`). */
  private readonly wakers = new Map<string, () => void>();

  constructor(
    private readonly limit: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * A release function, or null when the limit is reached, or when an approved call has reserved the next free slot
   * and this is not one (`approvedCall`: the id of the approved call asking). An approved call that takes a slot no
   * longer waits: the reservation ends once no other call it is kept for still does.
   */
  acquire(key: string, approvedCall?: string): (() => void) | null {
    const reservation = this.reserved.get(key);
    if (reservation !== undefined && approvedCall === undefined) {
      if (this.now() < reservation.until) return null;
      this.dropReservation(key);
    }
    const n = this.inFlight.get(key) ?? 0;
    if (n >= this.limit) return null;
    if (approvedCall !== undefined) this.unreserve(approvedCall);
    this.inFlight.set(key, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.inFlight.get(key) ?? 1) - 1;
      if (left <= 0) this.inFlight.delete(key);
      else this.inFlight.set(key, left);
      this.wakeWaiting(key);
    };
  }

  /**
   * A slot of `key` was given back: the approved calls it is kept for are woken (not left to the next sweep, seconds
   * away, while new calls there are refused "retry shortly"). After the current turn: the one waking may still be
   * on its way out of the attempt that reserved the slot.
   */
  private wakeWaiting(key: string): void {
    const reservation = this.reserved.get(key);
    if (reservation === undefined || (this.inFlight.get(key) ?? 0) >= this.limit) return;
    for (const holder of reservation.holders) {
      const wake = this.wakers.get(holder);
      if (wake) setImmediate(wake);
    }
  }

  private dropReservation(key: string): void {
    const reservation = this.reserved.get(key);
    this.reserved.delete(key);
    for (const holder of reservation?.holders ?? []) if (!this.isHolder(holder)) this.wakers.delete(holder);
  }

  private isHolder(holder: string): boolean {
    for (const { holders } of this.reserved.values()) if (holders.has(holder)) return true;
    return false;
  }

  /**
   * Approved call `holder` found `key` full: new calls are refused for up to `forMs`, until every call it is kept for
   * has taken a slot or is unreserved. `wake` is called once a slot of `key` is given back meanwhile.
   */
  reserve(key: string, forMs: number, holder: string, wake?: () => void): void {
    const holders = this.reserved.get(key)?.holders ?? new Set<string>();
    holders.add(holder);
    this.reserved.set(key, { until: this.now() + forMs, holders });
    if (wake) this.wakers.set(holder, wake);
  }

  /** `holder` no longer waits for a slot (settled, or run elsewhere): a reservation kept for it alone ends. */
  unreserve(holder: string): void {
    for (const [key, { holders }] of this.reserved) {
      if (holders.delete(holder) && holders.size === 0) this.reserved.delete(key);
    }
    this.wakers.delete(holder);
  }

  /** The calls reservations are kept for now. */
  reservationHolders(): string[] {
    return [...new Set([...this.reserved.values()].flatMap((r) => [...r.holders]))];
  }

  count(key: string): number {
    return this.inFlight.get(key) ?? 0;
  }
}
