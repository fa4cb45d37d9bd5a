import { describe, expect, it } from 'vitest';
import { retryDelayMs } from './retry-math.js';

const opts = { baseMs: 100, maxMs: 1_000 };

describe('retryDelayMs', () => {
  it('grows the ceiling exponentially and caps it', () => {
    expect(retryDelayMs(1, undefined, opts, () => 0.999)).toBe(99);
    expect(retryDelayMs(2, undefined, opts, () => 0.999)).toBe(199);
    expect(retryDelayMs(3, undefined, opts, () => 0.999)).toBe(399);
    expect(retryDelayMs(10, undefined, opts, () => 0.999)).toBe(999);
  });

  it('uses full jitter: anything from zero up to the ceiling', () => {
    expect(retryDelayMs(3, undefined, opts, () => 0)).toBe(0);
    expect(retryDelayMs(3, undefined, opts, () => 0.5)).toBe(200);
  });

  it('never waits less than Retry-After, and spreads callers beyond it by the growing jitter', () => {
    expect(retryDelayMs(1, 1_500, opts, () => 0)).toBe(1_500);
    expect(retryDelayMs(1, 1_500, opts, () => 0.1)).toBe(1_510);
    expect(retryDelayMs(4, 10, opts, () => 0.9)).toBe(730);
    expect(retryDelayMs(2, 2_000, opts, () => 0.999) - retryDelayMs(1, 2_000, opts, () => 0.999)).toBe(100); // grows per attempt
  });
});
