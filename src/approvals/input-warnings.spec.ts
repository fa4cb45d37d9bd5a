import { describe, expect, it } from 'vitest';
import { medianMs } from '../common/timing.spec-support.js';
import { inputWarnings } from './input-warnings.js';

describe('inputWarnings: where an approval input may be drawn otherwise than it runs', () => {
  it('says nothing of plain input, of one script per word (Cyrillic, Greek, Latin with accents), or of an emoji sequence', () => {
    expect(inputWarnings({ orderId: '12345', amount: '40.00', note: 'Bitte erstatten — привет, Ελλάδα, José 👨‍👩‍👧 ❤️‍🔥' })).toEqual([]);
    expect(inputWarnings(null)).toEqual([]);
    expect(inputWarnings(['a', 1, true])).toEqual([]);
  });

  it('finds format characters in values and names, escaped in the path it names', () => {
    expect(inputWarnings({ amount: '\u202E00.009' })).toEqual([
      'amount: the value holds invisible or direction-changing characters (U+202E): a screen may show it otherwise than it runs',
    ]);
    expect(inputWarnings({ list: ['ok', 'soft\u00ADhyphen'] })[0]).toMatch(/^list\[1\]: the value holds .*\(U\+00AD\)/);
    expect(inputWarnings({ 'pay\u2066ee': 'x' })[0]).toMatch(/^\["pay\\u2066ee"\]: the member name holds .*\(U\+2066\)/);
  });

  it('finds Latin words with Cyrillic or Greek letters in them, and twin members (fullwidth, zero-width) of one object', () => {
    expect(inputWarnings({ payee: 'acme-p\u0430youts' })).toEqual(['payee: the value mixes Latin letters with Cyrillic or Greek ones in one word (letters that look alike)']);
    expect(inputWarnings({ amount: '1.00', 'ａmount': '900.00' })).toEqual([
      'ａmount: drawn like the member "amount" beside it (two members, one name on screen)'.replace('ａmount:', '["ａmount"]:'),
    ]);
    expect(inputWarnings({ Ο: 'omicron' })).toEqual([]); // a Greek name alone is one script
  });

  it('says at most 20 things', () => {
    const many = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, 'x\u200By']));
    expect(inputWarnings(many)).toHaveLength(20);
  });
});

describe('inputWarnings: bounded work', () => {
  it('stops at 20 warnings and at 4,000 texts, saying so, whatever the input holds', () => {
    // 40,000 names holding a zero-width space: the first 20 are said, and nothing after them is worked out.
    const manyFlagged = Object.fromEntries(Array.from({ length: 40_000 }, (_, i) => [`k\u200B${i}`, 1]));
    expect(inputWarnings(manyFlagged)).toHaveLength(20);
    // 40,000 non-ASCII names with nothing to say: looked at up to the cap, then said.
    const manyPlain = Object.fromEntries(Array.from({ length: 40_000 }, (_, i) => [`größe${i}`, 'wert']));
    expect(inputWarnings(manyPlain)).toEqual(['only the first 4000 values and member names were looked at: look through the rest yourself']);
    // Against a pass that touches each name once (the keys alone are most of the cost of such an input), each the
    // median of five runs (medianMs: one GC pause or a busy neighbour does not decide; one run each failed 1 in 28).
    const flaggedMs = medianMs(() => inputWarnings(manyFlagged));
    const plainMs = medianMs(() => inputWarnings(manyPlain));
    const onePass = medianMs(() => {
      for (const k of Object.keys(manyPlain)) if (k.length > 1_000) throw new Error('not reached');
    });
    expect(flaggedMs).toBeLessThan(4 * onePass + 50);
    expect(plainMs).toBeLessThan(4 * onePass + 50);
    expect(inputWarnings(Array.from({ length: 100_000 }, () => 'plain'))).toEqual(['only the first 4000 values and member names were looked at: look through the rest yourself']);
  });
});
