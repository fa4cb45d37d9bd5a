/** In-flight vendor calls per org × vendor, per process. `acquire` never waits: full means "come back later". */
export class ConcurrencyLeases {
  private readonly inFlight = new Map<string, number>();

  constructor(private readonly limit: number) {}

  /** A release function, or null when the limit is reached. */
  acquire(key: string): (() => void) | null {
    const n = this.inFlight.get(key) ?? 0;
    if (n >= this.limit) return null;
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

  count(key: string): number {
    return this.inFlight.get(key) ?? 0;
  }
}
