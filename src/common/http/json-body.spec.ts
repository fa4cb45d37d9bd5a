import { describe, expect, it } from 'vitest';
import { unrepresentableNumber } from './json-body.js';

const check = (text: string) => unrepresentableNumber(JSON.parse(text), text);

describe('unrepresentableNumber', () => {
  it('a literal too big for a double (it parses to ±Infinity): infinite', () => {
    for (const n of ['1e309', '-1e309', '9'.repeat(400), '1.5e99999']) expect(check(`{"a":[1,${n}]}`), n).toBe('infinite');
    // even next to a rounded integer: the walk finds Infinity first
    expect(check('[1234567890123456789,1e309]')).toBe('infinite');
  });

  it('an integer beyond 2^53 that the double rounds: rounded, wherever it is and however it is spelled', () => {
    for (const n of [
      '1234567890123456789', '-1234567890123456789', '12345678901234567890', '9007199254740993', '9223372036854775807',
      '12345678901234567890.0', '1234567890123456789e1', '1.2345678901234567891e30', '9007199254740992.5', '100000000000000000001',
    ]) {
      expect(check(`{"body":{"reply_to":${n}}}`), n).toBe('rounded');
      expect(check(`[0, "x", [${n}]]`), n).toBe('rounded');
      expect(check(n), n).toBe('rounded');
    }
  });

  it('numbers the double writes back as the same number pass: decimals, small integers, exact large ones', () => {
    for (const n of [
      '0', '-0', '0.1', '1e3', '1E+3', '12345', '9007199254740991', '-9007199254740991', '9007199254740992', '1e20', '100000000000000000000.000',
      '1e308', '1.5e300', '6.02214076e23', '1.2345678901234567e30', '99999999999999.99', '0.1e-400', '123.456e-2', `1${'0'.repeat(300)}`, '1000000000000000100000',
      '-12345678901234567000', '0.12345678901234567890123',
    ]) {
      expect(check(`{"a":${n}}`), n).toBeUndefined();
    }
  });

  it('digits inside strings and keys are not numbers', () => {
    expect(check('{"1234567890123456789":"1234567890123456789","a\\"":"x\\"1234567890123456789","n":1e20}')).toBeUndefined();
    expect(check('{"k\\\\":1234567890123456789}')).toBe('rounded');
  });
});
