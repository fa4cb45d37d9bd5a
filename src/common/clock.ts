import { Injectable } from '@nestjs/common';

/** Time behind an injectable seam so expiry, breakers and sweeps are testable without sleeps. */
@Injectable()
export class Clock {
  private offsetMs = 0;

  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }

  nowMs(): number {
    return Date.now() + this.offsetMs;
  }

  /** Tests only: move time forward. */
  advance(ms: number): void {
    this.offsetMs += ms;
  }
}
