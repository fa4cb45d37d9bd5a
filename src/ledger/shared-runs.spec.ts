import { describe, expect, it } from 'vitest';
import { SharedRuns } from './shared-runs.js';

/** A job that runs until released, counting how often it was started. */
function gatedJob<T>(value: T): { job: () => Promise<T>; starts: () => number; release: () => void; fail: (err: Error) => void } {
  let starts = 0;
  let settle: { resolve: (v: T) => void; reject: (e: Error) => void } | undefined;
  const done = new Promise<T>((resolve, reject) => (settle = { resolve, reject }));
  return {
    job: () => {
      starts++;
      return done;
    },
    starts: () => starts,
    release: () => settle!.resolve(value),
    fail: (err) => settle!.reject(err),
  };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('SharedRuns', () => {
  it('callers of a key that is running share its one run and its answer', async () => {
    const runs = new SharedRuns<string>(2);
    const j = gatedJob('answer');
    const callers = Array.from({ length: 20 }, () => runs.run('org-a', j.job));
    await tick();
    expect(j.starts()).toBe(1);
    j.release();
    expect(await Promise.all(callers)).toEqual(Array(20).fill('answer'));
    expect(runs.size).toBe(0);
  });

  it('a caller after the run has finished starts a new one (answers are not cached)', async () => {
    const runs = new SharedRuns<number>(2);
    let n = 0;
    expect(await runs.run('org-a', async () => ++n)).toBe(1);
    expect(await runs.run('org-a', async () => ++n)).toBe(2);
  });

  it('shares a failure with every caller of the run, and the next run starts afresh', async () => {
    const runs = new SharedRuns<string>(2);
    const j = gatedJob('never');
    const callers = [runs.run('org-a', j.job), runs.run('org-a', j.job)];
    j.fail(new Error('database down'));
    for (const c of callers) await expect(c).rejects.toThrow('database down');
    expect(await runs.run('org-a', async () => 'again')).toBe('again');
  });

  it('runs at most `limit` keys at once; the others wait their turn, in order, and may be joined while they wait', async () => {
    const runs = new SharedRuns<string>(2);
    const jobs = ['a', 'b', 'c', 'd'].map((k) => ({ key: k, ...gatedJob(k) }));
    const answers = jobs.map((j) => runs.run(j.key, j.job));
    const joined = runs.run('d', async () => 'a second run of d');
    await tick();
    expect(jobs.map((j) => j.starts())).toEqual([1, 1, 0, 0]);
    jobs[1].release();
    await tick();
    expect(jobs.map((j) => j.starts())).toEqual([1, 1, 1, 0]);
    // A new key does not take the freed slot ahead of the one waiting.
    const late = gatedJob('e');
    const lateAnswer = runs.run('e', late.job);
    jobs[0].release();
    await tick();
    expect(jobs.map((j) => j.starts())).toEqual([1, 1, 1, 1]);
    expect(late.starts()).toBe(0);
    jobs[2].release();
    jobs[3].release();
    await tick();
    expect(late.starts()).toBe(1);
    late.release();
    expect(await Promise.all([...answers, joined, lateAnswer])).toEqual(['a', 'b', 'c', 'd', 'd', 'e']);
  });
});
