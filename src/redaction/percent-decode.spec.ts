import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { expectNoWorseThanProse } from './cost.spec-support.js';
import { redactOutput } from './redaction.service.js';
import { percentDecode } from './percent-decode.js';

/** What percentDecode did before it stopped throwing: the reference it must agree with. */
function byDecodeUriComponent(text: string): string {
  return text.replace(/(?:%[0-9A-Fa-f]{2})+/g, (escapes) => {
    try {
      return decodeURIComponent(escapes);
    } catch {
      return escapes.replace(/%[0-7][0-9A-Fa-f]/g, (ascii) => String.fromCharCode(parseInt(ascii.slice(1), 16)));
    }
  });
}

const escape = (b: number): string => `%${b.toString(16).padStart(2, '0')}`;

describe('percentDecode', () => {
  it('decodes as decodeURIComponent does, and keeps a malformed run but its ASCII escapes', () => {
    expect(percentDecode('a%20b%2Bc')).toBe('a b+c');
    expect(percentDecode('%E2%82%AC%F0%9F%98%80')).toBe('€😀');
    expect(percentDecode('%E0%A4%40x')).toBe('%E0%A4@x'); // a broken sequence: only its ASCII escape decoded
    expect(percentDecode('%C0%AF')).toBe('%C0%AF'); // an overlong "/"
    expect(percentDecode('%ED%A0%80')).toBe('%ED%A0%80'); // a surrogate
    expect(percentDecode('%F4%90%80%80')).toBe('%F4%90%80%80'); // above U+10FFFF
    expect(percentDecode('100%')).toBe('100%');
  });

  it('agrees with decodeURIComponent on any mix of escapes, bytes of every kind, and text', () => {
    const piece = fc.oneof(
      fc.integer({ min: 0, max: 255 }).map(escape),
      fc.integer({ min: 0, max: 255 }).map((b) => escape(b).toUpperCase()),
      fc.constantFrom('%', '%2', '%zz', '+', ' ', 'a', 'é', '😀', '%E2%82', '%AC', '%F0%9F%98'),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), (pieces) => {
        const text = pieces.join('');
        expect(percentDecode(text)).toBe(byDecodeUriComponent(text));
      }),
      { numRuns: 2_000 },
    );
  });

  it('a vendor answer of malformed escapes is redacted at about the cost of plain text (each escape threw: 140 times it)', () => {
    const TAIL = ' sk_live_\u200bABCDEFGHIJKLMNOPQRST'; // a secret split by a format character: the whole text is redacted
    const text = (unit: string) => unit.repeat(Math.ceil(10_000 / unit.length)).slice(0, 10_000 - TAIL.length) + TAIL;
    const worst = { items: Array.from({ length: 52 }, () => text('%9A+')) };
    expect(redactOutput(worst)).toEqual({ items: Array(52).fill('[REDACTED]') });
    // The redaction specs' own bound: at most 20 times prose of the same lengths (CPU), plus 0.5 s.
    expectNoWorseThanProse(worst.items, (t) => redactOutput({ t }));
  });
});
