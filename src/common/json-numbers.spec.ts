import { describe, expect, it } from 'vitest';
import { hasRoundedLiteral, parseJsonKeepingNumbers } from './json-numbers.js';

describe('parseJsonKeepingNumbers', () => {
  it('keeps a number a double would change as the digits written, as a string', () => {
    expect(parseJsonKeepingNumbers('{"ticket":{"id":12345678901234567891,"n":2}}')).toEqual({ ticket: { id: '12345678901234567891', n: 2 } });
    expect(parseJsonKeepingNumbers('[1e400, -1e400, 1e-400, 0.1]')).toEqual(['1e400', '-1e400', '1e-400', 0.1]);
  });

  it('parses numbers a double holds as numbers, however they are spelled', () => {
    expect(parseJsonKeepingNumbers('[0.30000000000000004, 1.50e3, 100000000000000000000, 0.000001, -0, 0e5, 123456789012345]')).toEqual([
      0.30000000000000004, 1500, 1e20, 0.000001, -0, 0, 123456789012345,
    ]);
  });

  it('leaves digits inside strings alone, escapes included', () => {
    expect(parseJsonKeepingNumbers('{"a":"12345678901234567891","b\\"":"\\\\","c":12345678901234567891}')).toEqual({
      a: '12345678901234567891',
      'b"': '\\',
      c: '12345678901234567891',
    });
  });

  it('a text without numbers, or not JSON, is JSON.parse', () => {
    expect(parseJsonKeepingNumbers('{"a":["x",true,null]}')).toEqual({ a: ['x', true, null] });
    expect(() => parseJsonKeepingNumbers('{"a":')).toThrow(SyntaxError);
  });

  it('hasRoundedLiteral finds the same literals', () => {
    expect(hasRoundedLiteral('{"id":12345678901234567891}')).toBe(true);
    expect(hasRoundedLiteral('{"id":"12345678901234567891","n":12345678901234567}')).toBe(true);
    expect(hasRoundedLiteral('{"id":"12345678901234567891","n":1234567890123456}')).toBe(false);
  });
});
