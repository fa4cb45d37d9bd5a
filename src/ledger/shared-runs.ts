/**
 * Runs keyed jobs, each key's one at a time and shared, at most `limit` keys at
 * once: a caller whose key is already running (or waiting its turn) gets that
 * run's answer instead of starting another; a new key waits while `limit` are
 * running, first come first served.
 *
 * For chain verification, which recomputes an org's whole chain on the event
 * loop: without it, every request was one more full walk, and an ops key firing
 * verifies in parallel starved tool calls on its replica.
 */
export class SharedRuns<T> {
  private readonly runs = new Map<string, Promise<T>>();
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  run(key: string, job: () => Promise<T>): Promise<T> {
    const shared = this.runs.get(key);
    if (shared) return shared;
    const run = this.inTurn(job).finally(() => this.runs.delete(key));
    this.runs.set(key, run);
    return run;
  }

  /** Keys running or waiting their turn (for tests and metrics). */
  get size(): number {
    return this.runs.size;
  }

  private async inTurn(job: () => Promise<T>): Promise<T> {
    // A finishing job hands its slot straight to the next waiter (`active` unchanged): no newcomer takes it in between.
    if (this.active < this.limit) this.active++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await job();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}
