import { describe, expect, it } from 'vitest';
import { setBounded } from './bounded-map.js';

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
});
