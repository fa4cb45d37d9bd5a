import { describe, expect, it } from 'vitest';
import { unrepresentableNumber } from '../json-numbers.js';
import { batchItemSpans, refuseBatchItems, refusedBatchItem } from './json-body.js';

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

  it('a decimal of more significant digits than a double holds, or a non-zero one below its range: rounded (1.000000000000000001 went on as 1)', () => {
    for (const n of [
      '1.000000000000000001', '-1.000000000000000001', '0.12345678901234567890123', '3.14159265358979323846', '1.0000000000000000001e2',
      '99999999999999.99', '0.1e-400', '1e-400', '-2.5E-330', '5e-325', `0.${'0'.repeat(400)}1`,
    ]) {
      expect(check(`{"body":{"amount":${n}}}`), n).toBe('rounded');
      expect(check(n), n).toBe('rounded');
    }
  });

  it('numbers the double writes back as the same number pass: decimals, small integers, exact large ones', () => {
    for (const n of [
      '0', '-0', '0.0', '0e-400', '0.1', '1e3', '1E+3', '12345', '9007199254740991', '-9007199254740991', '9007199254740992', '1e20', '100000000000000000000.000',
      '1e308', '1.5e300', '6.02214076e23', '1.2345678901234567e30', '123.456e-2', `1${'0'.repeat(300)}`, '1000000000000000100000',
      '-12345678901234567000', '0.30000000000000004', '5e-324', '2.2250738585072014e-308', '1.7976931348623157e308', '0.1000000000000000000000',
    ]) {
      expect(check(`{"a":${n}}`), n).toBeUndefined();
    }
  });

  it('digits inside strings and keys are not numbers', () => {
    expect(check('{"1234567890123456789":"1234567890123456789","a\\"":"x\\"1234567890123456789","n":1e20}')).toBeUndefined();
    expect(check('{"k\\\\":1234567890123456789}')).toBe('rounded');
  });
});

describe('batchItemSpans', () => {
  const items = (text: string) => batchItemSpans(text).map(([a, b]) => text.slice(a, b).trim());

  it('the text of each toolUses item, nested brackets, commas and brackets in strings included', () => {
    expect(items('{"toolUses":[1, {"a":[1,2],"b":"],[,"} ,"x\\"]",[[]],{}]}')).toEqual(['1', '{"a":[1,2],"b":"],[,"}', '"x\\"]"', '[[]]', '{}']);
    expect(items(' { "toolUses" : [ ] } ')).toEqual([]);
  });

  it('of repeated toolUses members, the last one (the one JSON.parse keeps)', () => {
    expect(items('{"toolUses":[1,2],"toolUses":{"a":[3]},"toolUses":[4]}')).toEqual(['4']);
  });
});

describe('refuseBatchItems', () => {
  /** The body after the reader: each item, or the 400 detail of a refused one; false when the whole body is refused. */
  const read = (text: string) => {
    const body = JSON.parse(text) as { toolUses: unknown[] };
    if (!refuseBatchItems(body, text)) return false;
    return body.toolUses.map((item) => refusedBatchItem(item)?.detail ?? item);
  };

  it('only the items holding a number JSON.parse lost are refused, each with the single-call words; their ids stay', () => {
    const out = read('{"toolUses":[{"id":"a","n":1},{"id":"b","n":12345678901234567890},{"id":"c","n":[1e400]},7,9223372036854775807]}');
    expect(out).toEqual([
      { id: 'a', n: 1 },
      'a number in the body would be rounded (an integer beyond 2^53, or more significant digits than a double holds): send it as a string',
      'a number in the body is too large to represent',
      7,
      'a number in the body would be rounded (an integer beyond 2^53, or more significant digits than a double holds): send it as a string',
    ]);
    const body = JSON.parse('{"toolUses":[{"id":"b","n":1e400}]}') as { toolUses: unknown[] };
    refuseBatchItems(body, '{"toolUses":[{"id":"b","n":1e400}]}');
    expect(body.toolUses[0]).toEqual({ id: 'b' }); // nothing else of it is passed on
  });

  it('a number outside the items, or a body that is not the envelope alone: the whole body is refused', () => {
    expect(read('{"toolUses":[{"n":1e400}],"x":1}')).toBe(false);
    expect(read('{"toolUses":[1],"toolUses":[{"n":1234567890123456789}]}')).not.toBe(false);
    // a rounded literal in a repeated member JSON.parse dropped is outside the items
    expect(read('{"toolUses":[1234567890123456789],"toolUses":[{"n":1234567890123456789}]}')).toBe(false);
    expect(read('{"toolUses":{"n":1e400}}')).toBe(false);
    // an exact large number is no problem: nothing to refuse
    expect(read('{"toolUses":[{"n":9007199254740992}]}')).toBe(false);
    expect(refuseBatchItems([Infinity], '[1e400]')).toBe(false);
  });
});
