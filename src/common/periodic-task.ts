import type { Logger } from '@nestjs/common';
import { loggableErrorText } from './errors/loggable-error.js';
import { FailureStreak } from './failure-streak.js';

/**
 * Runs `work` again and again, `everyMs` after the previous run ended: runs
 * never overlap, a failure is logged and the next run still comes, and
 * `stop()` waits for the run in progress so shutdown never closes the
 * database under it. The timer does not keep the process alive. Failures in a
 * row are logged as a streak (FailureStreak), not one line per run.
 */
export class PeriodicTask {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;
  private readonly failures: FailureStreak;

  constructor(
    /** names the work in the log line of a failed run */
    what: string,
    private readonly everyMs: number,
    private readonly work: () => Promise<unknown>,
    log: Logger,
    /** a monotonic clock in ms (tests pass their own) */
    nowMs?: () => number,
  ) {
    this.failures = new FailureStreak(what, log, '', nowMs);
  }

  /** First run after `firstDelayMs` (default: one period). */
  start(firstDelayMs = this.everyMs): void {
    if (this.stopped || this.timer) return;
    this.schedule(firstDelayMs);
  }

  /**
   * No run starts once `signal` aborts (the application's stop has begun: ShutdownPhase); the one in progress
   * goes on, and stop() still waits for it. No signal: as before.
   */
  haltOn(signal: AbortSignal | undefined): this {
    if (!signal) return this;
    const halt = (): void => {
      this.stopped = true;
      clearTimeout(this.timer);
      this.timer = undefined;
    };
    if (signal.aborted) halt();
    else signal.addEventListener('abort', halt, { once: true });
    return this;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.running = this.work()
        .then(
          () => this.failures.succeeded(),
          (err: unknown) => this.failures.failed(loggableErrorText(err)),
        )
        .finally(() => {
          this.running = undefined;
          if (!this.stopped) this.schedule(this.everyMs);
        });
    }, delayMs);
    this.timer.unref();
  }
}
