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
    expect(limiter.takeMore('k', 2)).toBe(1); // needs 2 more tokens (1 for the retry's own): 1 s
    expect(limiter.takeMore('k', 1)).toBe(0); // what it held is still there
    expect(limiter.take('k')).toBe(1);
  });

  it('the wait it says is enough for the retry, whose own token take() spends again (at 1 request/s too)', () => {
    for (const [rps, cost] of [[1, 1], [2, 3], [3, 1], [5, 9], [50, 30]]) {
      const clock = { now: 0 };
      const limiter = new RateLimiter(rps, at(clock));
      let sizeRefusals = 0;
      for (let read = 0; read < 20; read++) {
        const wait = limiter.take('k');
        clock.now += wait * 1000; // a client honouring the guard's Retry-After
        if (wait > 0) expect(limiter.take('k')).toBe(0);
        const more = limiter.takeMore('k', cost);
        if (more === 0) continue;
        sizeRefusals++;
        clock.now += more * 1000; // …and the size refusal's: the same read sent again then passes
        expect(limiter.take('k'), `rps ${rps} cost ${cost} read ${read}`).toBe(0);
        expect(limiter.takeMore('k', cost), `rps ${rps} cost ${cost} read ${read}`).toBe(0);
      }
      if (rps === 1) expect(sizeRefusals).toBeGreaterThan(0); // the case the review found refused for ever
    }
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

describe('RateLimiter.owe: a cost admitted work is never refused for', () => {
  it('spends it whatever the bucket holds: the key owes the rest, and its next requests wait for it', () => {
    const clock = { now: 0 };
    const limiter = new RateLimiter(2, () => clock.now); // burst 4
    for (let i = 0; i < 4; i++) expect(limiter.take('k')).toBe(0); // empty
    limiter.owe('k', 6); // -6
    expect(limiter.take('k')).toBe(4); // 1 token needs 7: 3.5 s, said as 4
    clock.now = 3_500;
    expect(limiter.take('k')).toBe(0); // refilled by 7 since: 1 - 1 = 0
    limiter.owe('k', 0);
    expect(limiter.take('k')).toBe(1);
  });

  it('owes nothing with the limit off or for a key take() never saw', () => {
    const off = new RateLimiter(0);
    off.owe('k', 100);
    expect(off.take('k')).toBe(0);
    const limiter = new RateLimiter(2, () => 0);
    limiter.owe('unseen', 100);
    for (let i = 0; i < 4; i++) expect(limiter.take('unseen')).toBe(0);
  });
});

describe('RateLimiter.debtWait', () => {
  it('says how long a key in debt waits until it is out of it, and 0 when it is not', () => {
    const clock = { now: 0 };
    const limiter = new RateLimiter(2, () => clock.now);
    expect(limiter.debtWait('k')).toBe(0); // never seen
    expect(limiter.take('k')).toBe(0);
    expect(limiter.debtWait('k')).toBe(0); // 3 tokens
    limiter.owe('k', 8); // -5
    expect(limiter.debtWait('k')).toBe(3); // 5 tokens and the retry's own at 2 a second: 3 s
    clock.now = 2_500;
    expect(limiter.debtWait('k')).toBe(0);
    expect(new RateLimiter(0).debtWait('k')).toBe(0);
  });

  it('waiting what it says lets the retry through the guard, which spends its own token again (at 1 request/s too)', () => {
    for (const [rps, debt] of [[1, 3], [1, 1], [2, 5], [3, 7], [50, 200]]) {
      const clock = { now: 0 };
      const limiter = new RateLimiter(rps, () => clock.now);
      expect(limiter.take('k')).toBe(0);
      limiter.owe('k', debt + 2 * rps); // past the burst: in debt by about `debt`
      const wait = limiter.debtWait('k');
      expect(wait, `rps ${rps} debt ${debt}`).toBeGreaterThan(0);
      clock.now += wait * 1000;
      expect(limiter.take('k'), `rps ${rps} debt ${debt}`).toBe(0);
    }
  });

  it('time going back (a test moving the Clock back) takes nothing from a bucket: it refills again from there', () => {
    const clock = { now: 10_000 };
    const limiter = new RateLimiter(2, () => clock.now); // burst 4
    expect(limiter.take('k')).toBe(0); // 3 left
    clock.now = -3_600_000; // an hour back: before, the bucket owed 7,200 tokens and the key waited an hour
    expect(limiter.take('k')).toBe(0); // 2 left
    expect(limiter.take('k')).toBe(0);
    expect(limiter.take('k')).toBe(0);
    expect(limiter.take('k')).toBe(1); // empty: half a second's refill away, said as 1 s
    clock.now += 500;
    expect(limiter.take('k')).toBe(0);
  });
});
