import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { setBounded } from './bounded-map.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const heapUsed = (): number => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

describe('setBounded', () => {
  it('at the bound drops the entry stored longest ago, not every entry', () => {
    const m = new Map<string, number>();
    for (const [i, k] of ['a', 'b', 'c'].entries()) setBounded(m, k, i, 3);
    setBounded(m, 'd', 3, 3);
    expect([...m.keys()]).toEqual(['b', 'c', 'd']);
  });

  it('a key set again counts from then: a hot entry outlives a flood of new ones', () => {
    const m = new Map<string, number>();
    setBounded(m, 'hot', 0, 3);
    for (let i = 0; i < 10; i++) {
      setBounded(m, `cold${i}`, i, 3);
      setBounded(m, 'hot', i, 3);
    }
    expect(m.size).toBe(3);
    expect(m.get('hot')).toBe(9);
  });

  it('setting a key already there at the bound evicts nothing else', () => {
    const m = new Map([['a', 1], ['b', 2]]);
    setBounded(m, 'a', 5, 2);
    expect([...m]).toEqual([['b', 2], ['a', 5]]);
  });

  it('keeps a string key of its own: a key cut out of a long string does not keep that string alive', () => {
    // V8 keeps a cut of 13 characters or more as a view into the whole string: a run id the router cut out of a 16 KiB
    // request target kept the target alive as long as the run's snapshot was cached (found by a review of in-process
    // memory bounds: 15,030 B per cached run; 800 MB at the run cache's 50,000 entries).
    const ENTRIES = 200;
    const m = new Map<string, number>();
    const before = heapUsed();
    for (let i = 0; i < ENTRIES; i++) {
      const target = `/v1/runs/${'a'.repeat(16_000)}/${String(i).padStart(36, '0')}`;
      setBounded(m, target.slice(-36), i, 1_000);
    }
    const perEntry = (heapUsed() - before) / ENTRIES;
    expect(m.size).toBe(ENTRIES);
    expect(m.get('0'.repeat(35) + '7')).toBe(7);
    expect(perEntry, `${Math.round(perEntry)} B per entry`).toBeLessThan(1_000);
  });
});
