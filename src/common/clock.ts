import { readFileSync } from 'node:fs';
import { Injectable } from '@nestjs/common';

/** How far the wall and monotonic clocks may disagree on the time since the last reading before it is looked into. */
const DISAGREEMENT_MS = 1_000;

/**
 * Time behind an injectable seam so expiry, breakers and sweeps are testable without sleeps. It reads the database's
 * clock, not this host's: ClockSyncService reads it at start-up and every minute (correctTo), so replicas whose host
 * clocks are seconds apart still agree on when an approval expires, and the times the gateway writes (an approval's
 * expiry and decision, a result's lifetime) sit on one time line with the ones PostgreSQL writes (now(): created_at,
 * finished_at, the events).
 *
 * Between two readings time runs from the last one on this host's monotonic clock, not its wall clock: a wall clock
 * stepped between two readings (NTP setting right a resumed VM, `date -s`) would move the gateway's time by the whole
 * step until the next reading, and a sweep meanwhile expire approvals hours early. The monotonic clock stands still
 * while the host is suspended, though (the wall clock does not): when the wall clock has run ahead of it, the boot
 * clock (/proc/uptime, which counts a suspend) tells a suspend, whose time is then counted, from a step, which is not;
 * either way the database's clock is read again at once (onDisagreement).
 */
@Injectable()
export class Clock {
  private offsetMs = 0;
  /** The last reading: the database's clock, and this host's monotonic, wall and boot clocks then (null until the first). */
  private anchor: { dbMs: number; monoMs: number; hostMs: number; bootMs: number | null; roundTripMs: number } | null = null;
  private bootClockReadable = true;
  /** Called when the wall clock ran ahead of the monotonic one since the last reading (ClockSyncService reads again). */
  onDisagreement: (() => void) | null = null;

  now(): Date {
    return new Date(this.nowMs());
  }

  nowMs(): number {
    const a = this.anchor;
    if (!a) return this.hostNowMs() + this.offsetMs;
    let elapsed = this.monotonicMs() - a.monoMs;
    if (this.hostNowMs() - a.hostMs - elapsed > DISAGREEMENT_MS) {
      const boot = a.bootMs === null ? null : this.bootNowMs();
      const suspended = boot === null ? 0 : boot - a.bootMs! - elapsed;
      if (suspended > DISAGREEMENT_MS) {
        a.monoMs -= suspended; // the time the monotonic clock missed, counted from here on
        elapsed += suspended;
      }
      this.onDisagreement?.();
    }
    return a.dbMs + elapsed + this.offsetMs;
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

  /** This host's monotonic clock (ms from an arbitrary origin; stands still while the host is suspended). */
  monotonicMs(): number {
    return performance.now();
  }

  /** This host's boot clock (ms since boot, a suspend counted), null where /proc/uptime cannot be read. */
  bootNowMs(): number | null {
    if (!this.bootClockReadable) return null;
    const { ms, gone } = bootClockReading(() => readFileSync('/proc/uptime', 'latin1'));
    if (gone) this.bootClockReadable = false;
    return ms;
  }

  /**
   * ClockSyncService: the database read `dbMs` when this host's monotonic clock read `monoMs` and its wall clock
   * `hostMs`, placed within a round trip of `roundTripMs`. Time runs from that reading on; answers the database's
   * clock minus this host's wall clock.
   */
  correctTo(dbMs: number, monoMs: number, hostMs: number, roundTripMs = 0): number {
    this.anchor = { dbMs, monoMs, hostMs, bootMs: this.bootNowMs(), roundTripMs };
    return dbMs - hostMs;
  }

  /** The round trip of the reading time runs from (its error is at most half of it), null before the first. */
  readingRoundTripMs(): number | null {
    return this.anchor?.roundTripMs ?? null;
  }

  /** Tests only: move time forward. */
  advance(ms: number): void {
    this.offsetMs += ms;
  }
}

/**
 * The boot clock from /proc/uptime's text (`read`): ms since boot, or null; `gone` when it will never be readable
 * here (not Linux, no /proc, a text that is not a number). Any other error (no file descriptor left, for one) is
 * this read's alone.
 */
export function bootClockReading(read: () => string): { ms: number | null; gone: boolean } {
  let text: string;
  try {
    text = read();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { ms: null, gone: code === 'ENOENT' || code === 'EACCES' || code === 'ENOTDIR' };
  }
  const seconds = Number.parseFloat(text);
  return Number.isFinite(seconds) && seconds >= 0 ? { ms: seconds * 1000, gone: false } : { ms: null, gone: true };
}
