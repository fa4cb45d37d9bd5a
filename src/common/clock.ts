import { Injectable } from '@nestjs/common';

/**
 * Time behind an injectable seam so expiry, breakers and sweeps are testable without sleeps. It reads the database's
 * clock, not this host's: ClockSyncService measures the difference at start-up and every minute (correctTo), so
 * replicas whose host clocks are seconds apart still agree on when an approval expires, and the times the gateway
 * writes (an approval's expiry and decision, a result's lifetime) sit on one time line with the ones PostgreSQL
 * writes (now(): created_at, finished_at, the events).
 */
@Injectable()
export class Clock {
  private offsetMs = 0;
  /** The database's clock minus this host's, as last measured (0 until then). */
  private correctionMs = 0;

  now(): Date {
    return new Date(this.nowMs());
  }

  nowMs(): number {
    return this.hostNowMs() + this.correctionMs + this.offsetMs;
  }

  /**
   * A monotonic reading for durations (a breaker's cooldown): a host clock stepped by NTP or a resumed VM does not
   * move it, nor does the database correction; advance() does.
   */
  elapsedMs(): number {
    return performance.now() + this.offsetMs;
  }

  /** This host's own clock. */
  hostNowMs(): number {
    return Date.now();
  }

  /** ClockSyncService: the database read `dbMs` when this host read `hostMs`. Answers the correction now in use. */
  correctTo(dbMs: number, hostMs: number): number {
    this.correctionMs = dbMs - hostMs;
    return this.correctionMs;
  }

  /** Tests only: move time forward. */
  advance(ms: number): void {
    this.offsetMs += ms;
  }
}
