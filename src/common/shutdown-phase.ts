import { setMaxListeners } from 'node:events';
import { Injectable, type BeforeApplicationShutdown } from '@nestjs/common';

/**
 * The application's stop, from its first step (the HTTP drain: beginHttpDrain), for the background work that
 * should start nothing new once it has begun. Nest's shutdown hooks run module after module; a periodic task whose
 * own hook came late still started runs while earlier hooks waited (a database gone silent: a query timeout each),
 * and its hook then waited for that run too, so the waits added up past the stop's grace period.
 */
@Injectable()
export class ShutdownPhase implements BeforeApplicationShutdown {
  private readonly stop = new AbortController();

  constructor() {
    setMaxListeners(0, this.stop.signal); // every periodic task listens
  }

  /** Aborted when the stop begins. */
  get signal(): AbortSignal {
    return this.stop.signal;
  }

  begin(): void {
    this.stop.abort();
  }

  /** An app closed without a drain (tests, CLI): the stop begins with the first shutdown hook, at the latest. */
  beforeApplicationShutdown(): void {
    this.begin();
  }
}
