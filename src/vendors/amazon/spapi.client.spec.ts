import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { saysTokenExpired } from './spapi.client.js';

/** The match amz-tools/amazon-sp-api uses; quadratic on text repeating "access token", so no longer ours. */
const REFERENCE = /access token.*expired/i;

describe('saysTokenExpired: /access token.*expired/i in linear time', () => {
  it('agrees with the regex on SP-API answers and near misses', () => {
    for (const text of [
      'Access to requested resource is denied. The access token you provided has expired.',
      'The Access Token you provided has EXPIRED',
      'access tokenexpired',
      'expired access token',
      'The access token is invalid',
      'access token\nexpired',
      'access token\r\nhas expired',
      'access token\u2028expired',
      'first line\naccess token, then expired',
      'access  token expired',
      '',
    ]) {
      expect(saysTokenExpired(text), JSON.stringify(text)).toBe(REFERENCE.test(text));
    }
  });

  it('agrees with the regex on generated text of those words, cases and line breaks', () => {
    const piece = fc.constantFrom('access token', 'ACCESS TOKEN', 'Access', ' token', 'expired', 'EXPIRED', ' ', '\n', '\r', '\u2028', 'x', 'has ');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const text = pieces.join('');
        expect(saysTokenExpired(text)).toBe(REFERENCE.test(text));
      }),
      { numRuns: 2_000 },
    );
  });

  it('reads a 5 MB message repeating "access token" (the regex took minutes: ~10 s at 520 KB) and still finds an "expired" at its end', () => {
    const text = 'access token '.repeat(400_000);
    expect(saysTokenExpired(text)).toBe(false);
    expect(saysTokenExpired(`${text}expired`)).toBe(true);
  });
});
