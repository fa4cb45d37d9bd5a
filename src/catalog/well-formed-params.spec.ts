import { describe, expect, it } from 'vitest';
import { loneSurrogatePath } from './well-formed-params.js';

describe('loneSurrogatePath', () => {
  it('is undefined for well-formed text, surrogate pairs (an emoji) included, and for NUL', () => {
    expect(loneSurrogatePath({ note: 'Leave at the door 🎁', orderId: '1001', n: 3, b: true, z: null })).toBeUndefined();
    expect(loneSurrogatePath({ body: { a: ['x', { '🎁': 'nul \u0000 inside' }] } })).toBeUndefined();
    expect(loneSurrogatePath({})).toBeUndefined();
  });

  it('names the keys down to a string value holding half a pair, leading or trailing, or the two reversed', () => {
    expect(loneSurrogatePath({ orderId: '1', note: 'Leave at the door \ud83d' })).toEqual(['note']);
    expect(loneSurrogatePath({ note: '\udc00 first' })).toEqual(['note']);
    expect(loneSurrogatePath({ note: 'reversed \udc00\ud800' })).toEqual(['note']);
    expect(loneSurrogatePath({ body: { items: ['ok', { title: 'cut \ud83d' }] } })).toEqual(['body', 'items', '1', 'title']);
  });

  it('names a key that holds one, as the last step of the path', () => {
    expect(loneSurrogatePath({ body: { ['k\ud800']: 1 } })).toEqual(['body', 'k\ud800']);
  });

  it('finds the first one in document order when several are there', () => {
    expect(loneSurrogatePath({ a: ['fine', 'bad \ud800'], b: 'bad \udfff' })).toEqual(['a', '1']);
  });

  it('walks deep params without recursion', () => {
    let deep: unknown = 'bottom \ud800';
    for (let i = 0; i < 1_000; i++) deep = [deep];
    const path = loneSurrogatePath({ deep });
    expect(path).toHaveLength(1_001);
    expect(path?.[0]).toBe('deep');
  });
});
