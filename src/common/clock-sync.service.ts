import { Injectable, Logger, Optional, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { ShutdownPhase } from './shutdown-phase.js';
import { DataSource } from 'typeorm';
import { Clock } from './clock.js';
import { loggableErrorText } from './errors/loggable-error.js';
import { PeriodicTask } from './periodic-task.js';

export const CLOCK_SYNC_INTERVAL_MS = 60_000;
/** A reading whose round trip took longer cannot be placed well enough: the last correction stays. */
const MAX_ROUND_TRIP_MS = 500;
/** A host this far off the database is said once in the log (the gateway reads the database's time either way). */
const WARN_SKEW_MS = 1_000;

/**
 * Keeps the Clock on the database's time (see Clock): at start-up, before the sweeps start, and every minute (the
 * monotonic clock the Clock runs on between readings drifts, and stops while a VM is suspended). A failed reading is
 * logged and changes nothing.
 */
@Injectable()
export class ClockSyncService implements OnModuleInit, OnApplicationShutdown {
  private readonly log = new Logger('ClockSync');
  private readonly task = new PeriodicTask('clock sync', CLOCK_SYNC_INTERVAL_MS, () => this.sync(), this.log);
  private warned = false;
  /** The last reading was dropped as too slow (said once per streak). */
  private slowStreak = false;
  private again: Promise<number | null> | null = null;
  private lastAgainAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly ds: DataSource,
    private readonly clock: Clock,
    @Optional() phase?: ShutdownPhase,
  ) {
    this.task.haltOn(phase?.signal);
  }

  async onModuleInit(): Promise<void> {
    this.clock.onDisagreement = () => this.readAgainSoon();
    try {
      await this.sync();
    } catch (err) {
      this.log.warn({ err: loggableErrorText(err) }, "the database's clock could not be read; this host's clock is used until it can");
    }
    this.task.start();
  }

  async onApplicationShutdown(): Promise<void> {
    this.clock.onDisagreement = null;
    await this.task.stop();
    await this.again;
  }

  /**
   * The wall clock ran ahead of the monotonic one since the last reading (a suspend, or a step: see Clock): the
   * database's clock is read again now rather than at the minute. One at a time, and not more than once a second.
   */
  private readAgainSoon(): void {
    const now = this.clock.monotonicMs();
    if (this.again || now - this.lastAgainAt < 1_000) return;
    this.lastAgainAt = now;
    this.again = this.sync()
      .catch((err: unknown) => {
        this.log.warn({ err: loggableErrorText(err) }, "the database's clock could not be read again after this host's clocks disagreed; the next reading is at the minute");
        return null;
      })
      .finally(() => {
        this.again = null;
      });
  }

  /**
   * Measures the database's clock against this host's and corrects the Clock; the correction in ms, or null when the
   * reading was too slow to be placed (the last correction stays, and the first slow reading after a good one is
   * logged). A first reading is taken however slow it was: placed at its round trip's middle, it is off by at most
   * half the round trip, where this host's own clock may be off by anything (a replica starting while the database
   * is slow to answer would otherwise judge approval expiry on its host's clock until a reading came back fast). A
   * slow reading placed so is replaced by any later one with a shorter round trip, slow or not. Only a reading in
   * time tells how far off this host's clock is (the warning): a slow one's error could be most of what it shows.
   */
  async sync(): Promise<number | null> {
    const before = this.clock.monotonicMs();
    const hostBefore = this.clock.hostNowMs();
    const [{ ms }] = (await this.ds.query(`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`)) as [{ ms: number }];
    const after = this.clock.monotonicMs();
    const roundTripMs = Math.round(after - before);
    const slow = after - before > MAX_ROUND_TRIP_MS;
    if (slow && after - before >= (this.clock.readingRoundTripMs() ?? Number.POSITIVE_INFINITY)) {
      if (!this.slowStreak) this.log.warn({ roundTripMs }, "the database's clock answered too slowly to be read; the last reading stays until one comes back in time");
      this.slowStreak = true;
      return null;
    }
    this.slowStreak = false;
    if (slow) {
      this.log.warn({ roundTripMs }, "the database's clock answered slowly: the gateway's time may be off by up to half that until a reading comes back faster");
    }
    // Placed at the round trip's middle on the monotonic clock; the wall clock only for the warning below.
    const correction = this.clock.correctTo(ms, (before + after) / 2, hostBefore + (after - before) / 2, after - before);
    if (!slow && Math.abs(correction) >= WARN_SKEW_MS && !this.warned) {
      this.warned = true;
      this.log.warn({ correctionMs: Math.round(correction) }, "this host's clock is off the database's: the gateway reads the database's time (approval expiry, result lifetimes)");
    }
    return correction;
  }
}
