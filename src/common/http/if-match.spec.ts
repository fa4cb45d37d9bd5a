import { describe, expect, it } from 'vitest';
import { AppError } from '../errors/app-error.js';
import { medianMs } from '../timing.spec-support.js';
import { assertIfMatch, assertPreconditions, contentTag, parseIfMatch, parseIfNoneMatch, parsePreconditions } from './if-match.js';

const code = (f: () => unknown): string | undefined => {
  try {
    f();
    return undefined;
  } catch (err) {
    return err instanceof AppError ? err.code : 'not an AppError';
  }
};

describe('If-Match (RFC 9110 §13.1.1)', () => {
  it('parses *, one tag, a list (blanks and empty elements allowed, repeated fields joined); weak tags are kept out', () => {
    expect(parseIfMatch(undefined)).toBeUndefined();
    expect(parseIfMatch('*')).toEqual({ any: true });
    expect(parseIfMatch(' "abc" ')).toEqual({ tags: ['abc'] });
    expect(parseIfMatch('"a", W/"b",,"c"')).toEqual({ tags: ['a', 'c'] });
    expect(parseIfMatch(['"a"', '"b"'])).toEqual({ tags: ['a', 'b'] });
    expect(parseIfMatch('W/"a"')).toEqual({ tags: [] });
    expect(parseIfMatch('')).toEqual({ tags: [] }); // a list of none (§5.6.1): matches nothing
    expect(parseIfMatch(' , ,')).toEqual({ tags: [] });
    expect(parseIfMatch('""')).toEqual({ tags: [''] });
    // etagc holds a comma and obs-text (0x80-0xFF): a tag the server never made is still a tag (412 if stale, not 400).
    expect(parseIfMatch('"v1,old", "cur"')).toEqual({ tags: ['v1,old', 'cur'] });
    expect(parseIfMatch('"caf\u00e9"')).toEqual({ tags: ['caf\u00e9'] });
    expect(parseIfMatch('\t"a"\t,\t"b"')).toEqual({ tags: ['a', 'b'] });
  });

  it('anything else is 400 BAD_REQUEST', () => {
    for (const bad of ['abc', '"a" "b"', 'W/', '"a', 'a"', '*, "a"', '"a b"', 'w/"a"', '"a"b', '"\u0100"', '"a\u0000"', '\u00a0*', '*\u00a0', '\u00a0"a"']) expect(code(() => parseIfMatch(bad)), bad).toBe('BAD_REQUEST');
  });

  it('* with blanks (SP, HTAB) around it is *; a long run of blanks inside a header costs one pass, not one per blank', () => {
    expect(parseIfMatch(' \t*\t ')).toEqual({ any: true });
    expect(parseIfNoneMatch('\t*')).toEqual({ any: true });
    expect(code(() => parseIfMatch('* *'))).toBe('BAD_REQUEST');
    // The largest header HTTP_MAX_HEADER_BYTES allows: the trim tried every blank of the inner run to its end (4 s).
    const hostile = `x${' '.repeat(65_534)}x`;
    const plain = `${' '.repeat(65_535)}*`;
    expect(code(() => parseIfNoneMatch(hostile))).toBe('BAD_REQUEST');
    expect(medianMs(() => parseIfNoneMatch(hostile))).toBeLessThan(20 * medianMs(() => parseIfNoneMatch(plain)) + 10);
  });

  it('holds with no condition, with *, or when a strong tag equals the current one; else 412 PRECONDITION_FAILED with the current ETag', () => {
    expect(code(() => assertIfMatch(undefined, 'x'))).toBeUndefined();
    expect(code(() => assertIfMatch({ any: true }, 'x'))).toBeUndefined();
    expect(code(() => assertIfMatch({ tags: ['y', 'x'] }, 'x'))).toBeUndefined();
    expect(code(() => assertIfMatch({ tags: ['y'] }, 'x'))).toBe('PRECONDITION_FAILED');
    expect(code(() => assertIfMatch({ tags: [] }, 'x'))).toBe('PRECONDITION_FAILED');
    try {
      assertIfMatch({ tags: ['y'] }, 'x');
    } catch (err) {
      expect((err as AppError).extra.headers).toEqual({ ETag: '"x"' });
    }
  });

  it('contentTag: 22 base64url characters, the same for the same text only', () => {
    expect(contentTag('[1]')).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(contentTag('[1]')).toBe(contentTag('[1]'));
    expect(contentTag('[1]')).not.toBe(contentTag('[2]'));
  });
});

describe('If-None-Match on the whole-set PUTs', () => {
  const code = (f: () => void): string | undefined => {
    try {
      f();
      return undefined;
    } catch (err) {
      return (err as { code?: string }).code;
    }
  };

  it('keeps weak tags (it compares weakly) and refuses a malformed list naming its own header', () => {
    expect(parseIfNoneMatch('W/"3", "4"')).toEqual({ tags: ['3', '4'] });
    expect(parseIfNoneMatch('*')).toEqual({ any: true });
    expect(parseIfNoneMatch(undefined)).toBeUndefined();
    expect(() => parseIfNoneMatch('3')).toThrow(/If-None-Match must be/);
    expect(() => parseIfMatch('3')).toThrow(/If-Match must be/);
    expect(parsePreconditions(undefined, undefined)).toBeUndefined();
  });

  it('holds unless it names the current tag; If-Match is evaluated first', () => {
    expect(code(() => assertPreconditions(parsePreconditions(undefined, '"2"'), '3'))).toBeUndefined();
    expect(code(() => assertPreconditions(parsePreconditions(undefined, 'W/"3"'), '3'))).toBe('PRECONDITION_FAILED');
    expect(code(() => assertPreconditions(parsePreconditions(undefined, '*'), '3'))).toBe('PRECONDITION_FAILED');
    expect(code(() => assertPreconditions(parsePreconditions('"3"', '"2"'), '3'))).toBeUndefined();
    expect(code(() => assertPreconditions(parsePreconditions('"2"', '"1"'), '3'))).toBe('PRECONDITION_FAILED');
    expect(code(() => assertPreconditions(undefined, '3'))).toBeUndefined();
  });
});
