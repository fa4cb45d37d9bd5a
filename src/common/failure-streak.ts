import type { Logger } from '@nestjs/common';

/** While a failure keeps repeating with the same cause, it is logged again at most this often (with the count since). */
export const FAILURE_REMINDER_MS = 60_000;

/** Distinct causes of one streak said as they come; past these, only the minute's reminder. */
const MAX_CAUSES_SAID = 8;

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/**
 * The log of something retried on a timer (a background loop's run, one step of it): a streak of failures — a
 * database outage fails every run, several a second for the sealer — is one warning when it starts, another for
 * each cause not seen before in the streak or once a minute with the count, and one line when it works again; not a
 * line per run.
 */
export class FailureStreak {
  private streak?: { failures: number; since: number; seen: Set<string>; lastLoggedAt: number; unlogged: number };

  constructor(
    /** names what failed in the lines ("sealing", "expiry of overdue approvals") */
    private readonly what: string,
    private readonly log: Logger,
    /** what the failed lines add after the cause (what happens meanwhile) */
    private readonly meanwhile = '',
    /** a monotonic clock in ms (tests pass their own) */
    private readonly nowMs: () => number = () => performance.now(),
  ) {}

  failed(cause: string): void {
    const now = this.nowMs();
    const s = this.streak;
    const tail = this.meanwhile ? `; ${this.meanwhile}` : '';
    if (!s) {
      this.streak = { failures: 1, since: now, seen: new Set([cause]), lastLoggedAt: now, unlogged: 0 };
      this.log.warn(`${this.what} failed: ${cause}${tail}`);
      return;
    }
    s.failures++;
    // A cause not seen in this streak is said at once; one seen before (causes that alternate: a dead pooled connection,
    // then a connect timeout) waits for the minute's reminder, which names the latest.
    const newCause = !s.seen.has(cause) && s.seen.size < MAX_CAUSES_SAID;
    if (!newCause && now - s.lastLoggedAt < FAILURE_REMINDER_MS) {
      s.unlogged++;
      return;
    }
    s.seen.add(cause);
    const skipped = s.unlogged > 0 ? ` (${String(s.unlogged)} more failed runs not logged since the last line)` : '';
    this.log.warn(`${this.what} still failing, ${String(s.failures)} runs in a row over ${seconds(now - s.since)}: ${cause}${tail}${skipped}`);
    s.lastLoggedAt = now;
    s.unlogged = 0;
  }

  succeeded(): void {
    const s = this.streak;
    if (!s) return;
    this.streak = undefined;
    this.log.log(`${this.what} works again after ${String(s.failures)} failed ${s.failures === 1 ? 'run' : 'runs'} over ${seconds(this.nowMs() - s.since)}`);
  }
}
