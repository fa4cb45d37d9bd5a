import { describe, expect, it } from 'vitest';
import { RateLimiter } from './rate-limiter.js';

describe('RateLimiter.takeMore: a cost known once the request runs', () => {
  const at = (ms: { now: number }) => () => ms.now;

  it('passes on a bucket that was full before take(), leaving the key in debt by the rest', () => {
    const clock = { now: 0 };
    const limiter = new RateLimiter(2, at(clock)); // burst 4
    expect(limiter.take('k')).toBe(0); // 3 left
    expect(limiter.takeMore('k', 10)).toBe(0); // -7
    expect(limiter.take('k')).toBe(4); // 1 token needs 8 more: 4 s
    clock.now = 4_000;
    expect(limiter.take('k')).toBe(0);
  });

  it('refuses (nothing spent) what a part-spent bucket cannot pay, and says how long to wait', () => {
    const clock = { now: 0 };
    const limiter = new RateLimiter(2, at(clock));
    for (let i = 0; i < 3; i++) expect(limiter.take('k')).toBe(0); // 1 left
    expect(limiter.takeMore('k', 2)).toBe(1); // needs 1 more token: 0.5 s, said as 1
    expect(limiter.takeMore('k', 1)).toBe(0); // what it held is still there
    expect(limiter.take('k')).toBe(1);
  });

  it('costs nothing with the limit off, for nothing extra, or for a key take() never saw', () => {
    expect(new RateLimiter(0).takeMore('k', 100)).toBe(0);
    const limiter = new RateLimiter(2, () => 0);
    expect(limiter.takeMore('unseen', 100)).toBe(0);
    expect(limiter.take('k')).toBe(0);
    expect(limiter.takeMore('k', 0)).toBe(0);
    for (let i = 0; i < 3; i++) expect(limiter.take('k')).toBe(0); // the 0 spent nothing: 4 in all
  });
});
