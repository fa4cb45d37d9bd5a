import type { Logger } from '@nestjs/common';
import { loggableErrorText } from './errors/loggable-error.js';

/**
 * Runs `work` again and again, `everyMs` after the previous run ended: runs
 * never overlap, a failure is logged and the next run still comes, and
 * `stop()` waits for the run in progress so shutdown never closes the
 * database under it. The timer does not keep the process alive.
 */
export class PeriodicTask {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  constructor(
    /** names the work in the log line of a failed run */
    private readonly what: string,
    private readonly everyMs: number,
    private readonly work: () => Promise<unknown>,
    private readonly log: Logger,
  ) {}

  /** First run after `firstDelayMs` (default: one period). */
  start(firstDelayMs = this.everyMs): void {
    if (this.stopped || this.timer) return;
    this.schedule(firstDelayMs);
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
          () => undefined,
          (err: unknown) => this.log.warn(`${this.what} failed: ${loggableErrorText(err)}`),
        )
        .finally(() => {
          this.running = undefined;
          if (!this.stopped) this.schedule(this.everyMs);
        });
    }, delayMs);
    this.timer.unref();
  }
}
