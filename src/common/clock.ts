import { Injectable } from '@nestjs/common';

/**
 * Time behind an injectable seam so expiry, breakers and sweeps are testable without sleeps. It reads the database's
 * clock, not this host's: ClockSyncService reads it at start-up and every minute (correctTo), so replicas whose host
 * clocks are seconds apart still agree on when an approval expires, and the times the gateway writes (an approval's
 * expiry and decision, a result's lifetime) sit on one time line with the ones PostgreSQL writes (now(): created_at,
 * finished_at, the events). Between two readings time runs on this host's monotonic clock from the last one, never
 * on its wall clock: a wall clock stepped between two readings (NTP after a resumed VM, `date -s`) would otherwise
 * move the gateway's time by the whole step until the next reading, and a sweep meanwhile expire approvals hours
 * early. (After a suspend the monotonic clock lags until the next reading: late, never early.)
 */
@Injectable()
export class Clock {
  private offsetMs = 0;
  /** The database's clock as last read, and this host's monotonic clock then (null until the first reading). */
  private anchor: { dbMs: number; monoMs: number } | null = null;

  now(): Date {
    return new Date(this.nowMs());
  }

  nowMs(): number {
    const a = this.anchor;
    return (a ? a.dbMs + (this.monotonicMs() - a.monoMs) : this.hostNowMs()) + this.offsetMs;
  }

  /**
   * A monotonic reading for durations (a breaker's cooldown): a host clock stepped by NTP or a resumed VM does not
   * move it, nor does the database correction; advance() does.
   */
  elapsedMs(): number {
    return this.monotonicMs() + this.offsetMs;
  }

  /** This host's own wall clock (what is used before the database's clock is first read). */
  hostNowMs(): number {
    return Date.now();
  }

  /** This host's monotonic clock (ms from an arbitrary origin). */
  monotonicMs(): number {
    return performance.now();
  }

  /**
   * ClockSyncService: the database read `dbMs` when this host's monotonic clock read `monoMs` and its wall clock
   * `hostMs`. Time runs from that reading on; answers the database's clock minus this host's wall clock.
   */
  correctTo(dbMs: number, monoMs: number, hostMs: number): number {
    this.anchor = { dbMs, monoMs };
    return dbMs - hostMs;
  }

  /** Tests only: move time forward. */
  advance(ms: number): void {
    this.offsetMs += ms;
  }
}
