import type { Logger } from '@nestjs/common';
import { loggableErrorText } from './errors/loggable-error.js';

/** While runs keep failing with the same error, it is logged again at most this often (with the count since). */
export const FAILURE_REMINDER_MS = 60_000;

/**
 * Runs `work` again and again, `everyMs` after the previous run ended: runs
 * never overlap, a failure is logged and the next run still comes, and
 * `stop()` waits for the run in progress so shutdown never closes the
 * database under it. The timer does not keep the process alive.
 *
 * A streak of failures (a database outage fails every run, several a second
 * for the sealer) is one warning when it starts, another when the error
 * changes or once a minute with the count of failed runs, and one line when a
 * run succeeds again — not a line per run.
 */
export class PeriodicTask {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;
  private streak?: { failures: number; since: number; lastText: string; lastLoggedAt: number; unlogged: number };

  constructor(
    /** names the work in the log line of a failed run */
    private readonly what: string,
    private readonly everyMs: number,
    private readonly work: () => Promise<unknown>,
    private readonly log: Logger,
    /** a monotonic clock in ms (tests pass their own) */
    private readonly nowMs: () => number = () => performance.now(),
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
          () => this.succeeded(),
          (err: unknown) => this.failed(loggableErrorText(err)),
        )
        .finally(() => {
          this.running = undefined;
          if (!this.stopped) this.schedule(this.everyMs);
        });
    }, delayMs);
    this.timer.unref();
  }

  private failed(text: string): void {
    const now = this.nowMs();
    const s = this.streak;
    if (!s) {
      this.streak = { failures: 1, since: now, lastText: text, lastLoggedAt: now, unlogged: 0 };
      this.log.warn(`${this.what} failed: ${text}`);
      return;
    }
    s.failures++;
    if (text !== s.lastText || now - s.lastLoggedAt >= FAILURE_REMINDER_MS) {
      const skipped = s.unlogged > 0 ? ` (${String(s.unlogged)} more failed runs not logged since the last line)` : '';
      this.log.warn(`${this.what} still failing, ${String(s.failures)} runs in a row over ${seconds(now - s.since)}: ${text}${skipped}`);
      s.lastText = text;
      s.lastLoggedAt = now;
      s.unlogged = 0;
    } else {
      s.unlogged++;
    }
  }

  private succeeded(): void {
    const s = this.streak;
    if (!s) return;
    this.streak = undefined;
    this.log.log(`${this.what} works again after ${String(s.failures)} failed ${s.failures === 1 ? 'run' : 'runs'} over ${seconds(this.nowMs() - s.since)}`);
  }
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
