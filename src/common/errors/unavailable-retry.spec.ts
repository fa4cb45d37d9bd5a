import { describe, expect, it } from 'vitest';
import { resumableWrite, retryWhileUnavailable, unavailableRetryDelayMs } from './unavailable-retry.js';

const refused = (): Error => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
const wrong = (): Error => Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' });

/** A write that fails with the given errors first, then answers `value`. */
function writeFailing(errors: Error[], value = 'written'): { write: () => Promise<string>; calls: () => number } {
  let n = 0;
  return {
    write: async () => {
      const err = errors[n++];
      if (err) throw err;
      return value;
    },
    calls: () => n,
  };
}

describe('unavailableRetryDelayMs', () => {
  it('starts at 100 ms, doubles, and stops at the cap (also for huge attempt numbers)', () => {
    expect([0, 1, 2, 3, 4, 5].map((a) => unavailableRetryDelayMs(a, 1_000))).toEqual([100, 200, 400, 800, 1_000, 1_000]);
    expect(unavailableRetryDelayMs(5_000, 5_000)).toBe(5_000);
  });
});

describe('retryWhileUnavailable', () => {
  it('rides out a database that refuses a few times, then answers what the write answered', async () => {
    const w = writeFailing([refused(), refused(), refused()]);
    await expect(retryWhileUnavailable(w.write, { budgetMs: 5_000, capMs: 50 })).resolves.toBe('written');
    expect(w.calls()).toBe(4);
  });

  it('rethrows at once an error retrying cannot mend', async () => {
    const w = writeFailing([wrong()]);
    await expect(retryWhileUnavailable(w.write, { budgetMs: 5_000, capMs: 50 })).rejects.toMatchObject({ code: '23505' });
    expect(w.calls()).toBe(1);
  });

  it('gives up with the last refusal once the next wait would pass the budget', async () => {
    const w = writeFailing(Array.from({ length: 100 }, refused));
    const t0 = performance.now();
    await expect(retryWhileUnavailable(w.write, { budgetMs: 350, capMs: 100 })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    // Never waits past the budget (350 ms); ignoring it would mean 100 refusals 100 ms apart (~10 s). The gap between
    // the two is what is checked, not how busy the event loop is.
    expect(performance.now() - t0).toBeLessThan(350 + 3_000);
    expect(w.calls()).toBeGreaterThanOrEqual(3); // 0, 100, 200 (300 would end past the budget)
    expect(w.calls()).toBeLessThan(6);
  });

  it('stops waiting when the signal aborts (shutdown), with the last refusal', async () => {
    const w = writeFailing(Array.from({ length: 100 }, refused));
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 150);
    const t0 = performance.now();
    await expect(retryWhileUnavailable(w.write, { budgetMs: 60_000, capMs: 10_000, signal: stop.signal })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(performance.now() - t0).toBeLessThan(150 + 3_000); // the signal ignored, the waits (doubling to 10 s) would run for the 60 s budget
  });
});

describe('resumableWrite', () => {
  /** A guarded write answering in turn: an error to throw, or whether its guard matched. */
  function scripted(answers: (Error | boolean)[]): () => Promise<boolean> {
    let n = 0;
    return async () => {
      const a = answers[n++];
      if (a instanceof Error) throw a;
      return a ?? false;
    };
  }

  it('after a connection lost mid-write, a resend that finds the row settled asks whether it holds our outcome', async () => {
    let asked = 0;
    const attempt = resumableWrite(scripted([refused(), false]), async () => {
      asked++;
      return true;
    });
    await expect(attempt()).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await expect(attempt()).resolves.toBe(true);
    expect(asked).toBe(1);
    // ... and a row settled by someone else stays "not written"
    const other = resumableWrite(scripted([refused(), false]), async () => false);
    await other().catch(() => undefined);
    await expect(other()).resolves.toBe(false);
  });

  it('without an interrupted attempt, a guard that matched nothing is "settled elsewhere", without a read', async () => {
    let asked = 0;
    const attempt = resumableWrite(scripted([false]), async () => {
      asked++;
      return true;
    });
    await expect(attempt()).resolves.toBe(false);
    // an error that is not "unavailable" (a constraint) does not count as interrupted either
    const wrongFirst = resumableWrite(scripted([wrong(), false]), async () => {
      asked++;
      return true;
    });
    await wrongFirst().catch(() => undefined);
    await expect(wrongFirst()).resolves.toBe(false);
    expect(asked).toBe(0);
  });

  it('composes with retryWhileUnavailable: refused, refused, then the settled row turns out to be ours', async () => {
    const attempt = resumableWrite(scripted([refused(), refused(), false]), async () => true);
    await expect(retryWhileUnavailable(attempt, { budgetMs: 5_000, capMs: 20 })).resolves.toBe(true);
  });
});
