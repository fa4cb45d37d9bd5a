import { describe, expect, it } from 'vitest';
import { findUnstorableText, isStorableText, storableText } from './storable-text.js';

describe('storable text', () => {
  it('accepts ordinary text, paired surrogates and the literal characters "\\u0000"', () => {
    for (const t of ['', 'lookup', 'a 😀 b', '\\u0000', 'é\u00ff']) expect(isStorableText(t)).toBe(true);
  });

  it('refuses NUL and unpaired surrogates in any position', () => {
    for (const t of ['\u0000', 'a\u0000b', '\ud800', 'x\udc00', '\udc00\ud800', 'a😀\ud83d']) expect(isStorableText(t)).toBe(false);
  });

  it('repairs by replacing, never by dropping', () => {
    expect(storableText('look\u0000up')).toBe('look\uFFFDup');
    expect(storableText('a\ud800b\udc00')).toBe('a\uFFFDb\uFFFD');
    expect(storableText('a😀b')).toBe('a😀b');
  });

  it('finds bad keys and values at any depth', () => {
    expect(findUnstorableText({ a: [1, { b: 'ok' }] })).toBeUndefined();
    expect(findUnstorableText({ a: [1, { b: 'x\u0000' }] })).toBe('x\u0000');
    expect(findUnstorableText(JSON.parse('{"a":{"k\\u0000":1}}'))).toBe('k\u0000');
    expect(findUnstorableText(['\ud800'])).toBe('\ud800');
  });
});
