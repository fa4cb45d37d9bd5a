import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';
import { describe, expect, it } from 'vitest';
import { CodePointLength, codePoints } from './code-point-length.js';

class Named {
  @CodePointLength(1, 3)
  name!: unknown;
}
class Reason {
  @CodePointLength(0, 2)
  reason!: unknown;
}
const errors = (cls: new () => object, value: Record<string, unknown>) => validateSync(plainToInstance(cls, value)).flatMap((e) => Object.values(e.constraints ?? {}));

describe('CodePointLength', () => {
  it('counts code points: a surrogate pair is one, a variation selector or a lone surrogate is one too', () => {
    expect(codePoints('')).toBe(0);
    expect(codePoints('abc')).toBe(3);
    expect(codePoints('😀😀')).toBe(2);
    expect(codePoints('a\uFE0F')).toBe(2);
    expect(codePoints('\uD800a')).toBe(2);
    expect(codePoints('a\uDC00')).toBe(2);
    expect(codePoints('\uD83D')).toBe(1);
  });

  it('refuses what @Length let through (validator.js does not count U+FE0E/U+FE0F), with @Length\'s words', () => {
    expect(errors(Named, { name: 'abc' })).toEqual([]);
    expect(errors(Named, { name: '😀😀😀' })).toEqual([]);
    expect(errors(Named, { name: 'abc\uFE0F' })).toEqual(['name must be shorter than or equal to 3 characters']);
    expect(errors(Named, { name: 'a\uFE0E\uFE0Fb' })).toEqual(['name must be shorter than or equal to 3 characters']);
    expect(errors(Named, { name: '' })).toEqual(['name must be longer than or equal to 1 characters']);
    expect(errors(Named, { name: 5 })).toEqual(['name must be longer than or equal to 1 characters']);
    expect(errors(Reason, { reason: '' })).toEqual([]);
    expect(errors(Reason, { reason: 'ab\uFE0F' })).toEqual(['reason must be shorter than or equal to 2 characters']);
  });
});
