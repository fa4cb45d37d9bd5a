import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { actionDigest, CanonicalJsonError, canonicalJson, MAX_CANONICAL_DEPTH, nestedDeeperThan, sha256Hex, unkeyedActionDigest } from './canonical-json.js';

describe('canonicalJson', () => {
  it('writes scalars like JSON', () => {
    expect(canonicalJson(null)).toBe('null');
    expect(canonicalJson(true)).toBe('true');
    expect(canonicalJson(false)).toBe('false');
    expect(canonicalJson(42)).toBe('42');
    expect(canonicalJson(100.5)).toBe('100.5');
    expect(canonicalJson(-0)).toBe('0');
    expect(canonicalJson('a"b\\c\n')).toBe('"a\\"b\\\\c\\n"');
  });

  it('sorts object keys and drops whitespace', () => {
    expect(canonicalJson({ b: 1, a: 2, c: { z: 1, y: [3, 2, 1] } })).toBe('{"a":2,"b":1,"c":{"y":[3,2,1],"z":1}}');
  });

  it('does not depend on key insertion order, at any depth', () => {
    const a = { toolName: 't', action: 'x', params: { orderId: '1', nested: { q: 1, p: [{ b: 2, a: 1 }] } } };
    const b = { params: { nested: { p: [{ a: 1, b: 2 }], q: 1 }, orderId: '1' }, action: 'x', toolName: 't' };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
  });

  it('keeps array order', () => {
    expect(canonicalJson([3, 1, 2])).not.toBe(canonicalJson([1, 2, 3]));
  });

  it('sorts keys by UTF-16 code unit, not locale', () => {
    // 'Z' (0x5A) < 'a' (0x61) < 'é' (0xE9) < '😀' (0xD83D...) < 'ｚ' (0xFF5A)
    expect(canonicalJson({ ｚ: 1, '😀': 2, é: 3, a: 4, Z: 5 })).toBe('{"Z":5,"a":4,"é":3,"😀":2,"ｚ":1}');
  });

  it('keeps unicode text intact', () => {
    const text = canonicalJson({ note: 'Grüße, 東京 😀' });
    expect(text).toBe('{"note":"Grüße, 東京 😀"}');
    expect(JSON.parse(text)).toEqual({ note: 'Grüße, 東京 😀' });
  });

  it('escapes lone surrogates so the text stays valid', () => {
    expect(canonicalJson('\ud800')).toBe('"\\ud800"');
  });

  it('drops undefined object members and writes undefined array slots as null', () => {
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
    expect(canonicalJson([undefined, 1])).toBe('[null,1]');
  });

  it('matches its own JSON round trip', () => {
    const value = { b: [1, { d: 'x', c: null }], a: 'é', e: undefined, f: new Date('2026-01-01T00:00:00Z') };
    expect(canonicalJson(value)).toBe(canonicalJson(JSON.parse(JSON.stringify(value))));
  });

  it('handles a __proto__ own key as data', () => {
    const value: unknown = JSON.parse('{"__proto__": {"x": 1}, "a": 1}');
    expect(canonicalJson(value)).toBe('{"__proto__":{"x":1},"a":1}');
    expect(canonicalJson(Object.assign(Object.create(null) as object, { b: 1, a: 2 }))).toBe('{"a":2,"b":1}');
  });

  it('rejects cycles', () => {
    const a: Record<string, unknown> = { x: 1 };
    a.self = a;
    expect(() => canonicalJson(a)).toThrow(CanonicalJsonError);
    const arr: unknown[] = [];
    arr.push({ inner: arr });
    expect(() => canonicalJson(arr)).toThrow(/cyclic/);
  });

  it('accepts a shared reference that is not a cycle', () => {
    const shared = { k: 1 };
    expect(canonicalJson({ a: shared, b: [shared] })).toBe('{"a":{"k":1},"b":[{"k":1}]}');
  });

  it('rejects non-finite numbers, bigint, functions, symbols, undefined', () => {
    expect(() => canonicalJson(NaN)).toThrow(CanonicalJsonError);
    expect(() => canonicalJson({ a: Infinity })).toThrow(CanonicalJsonError);
    expect(() => canonicalJson([-Infinity])).toThrow(CanonicalJsonError);
    expect(() => canonicalJson({ a: 1n })).toThrow(CanonicalJsonError);
    expect(() => canonicalJson({ f: () => 1 })).toThrow(CanonicalJsonError);
    expect(() => canonicalJson([Symbol('s')])).toThrow(CanonicalJsonError);
    expect(() => canonicalJson(undefined)).toThrow(CanonicalJsonError);
  });

  it('rejects class instances that have no faithful JSON form', () => {
    expect(() => canonicalJson(new Map([['a', 1]]))).toThrow(CanonicalJsonError);
    expect(() => canonicalJson({ s: new Set([1]) })).toThrow(CanonicalJsonError);
  });

  it('writes Dates through toJSON', () => {
    expect(canonicalJson({ at: new Date('2026-08-02T14:05:11.000Z') })).toBe('{"at":"2026-08-02T14:05:11.000Z"}');
  });

  /** Arrays (or objects {"a": …}) nested `levels` deep, the outermost counting 1, as jsonDepth counts. */
  const arrays = (levels: number): unknown => JSON.parse('['.repeat(levels) + ']'.repeat(levels));
  const objects = (levels: number): unknown => JSON.parse('{"a":'.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1));

  it(`writes arrays and objects nested up to ${MAX_CANONICAL_DEPTH} levels, and refuses deeper as having no canonical form`, () => {
    expect(canonicalJson(arrays(MAX_CANONICAL_DEPTH))).toBe('['.repeat(MAX_CANONICAL_DEPTH) + ']'.repeat(MAX_CANONICAL_DEPTH));
    expect(canonicalJson(objects(MAX_CANONICAL_DEPTH))).toBe(JSON.stringify(objects(MAX_CANONICAL_DEPTH)));
    expect(() => canonicalJson(arrays(MAX_CANONICAL_DEPTH + 1))).toThrow(CanonicalJsonError);
    expect(() => canonicalJson(objects(MAX_CANONICAL_DEPTH + 1))).toThrow(/nested deeper than 64 levels/);
    // Well inside what the gateway takes in: a request body stops at 32 levels (34 for a batch).
    expect(MAX_CANONICAL_DEPTH).toBeGreaterThanOrEqual(2 * 32);
  });

  it('refuses a value nested thousands deep with a CanonicalJsonError, not a RangeError off the stack', () => {
    // What jsonb takes and pg's JSON.parse hands over (it parses without recursing); the writer ran out of stack.
    for (const levels of [5_000, 100_000]) {
      let thrown: unknown;
      try {
        canonicalJson({ metadata: arrays(levels) });
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(CanonicalJsonError);
    }
  });

  it('counts a toJSON hop as a level, so a toJSON that hands back a new one each time is refused too', () => {
    // A class instance (not a plain object) with a toJSON, each call a new one: no cycle for the ancestor check to see.
    class Endless {
      toJSON(): Endless {
        return new Endless();
      }
    }
    expect(() => canonicalJson(new Endless())).toThrow(CanonicalJsonError);
  });
});

describe('nestedDeeperThan', () => {
  it('tells whether arrays and objects nest past a number of levels, the outermost counting 1', () => {
    expect(nestedDeeperThan('text', 0)).toBe(false);
    expect(nestedDeeperThan(null, 0)).toBe(false);
    expect(nestedDeeperThan([], 0)).toBe(true);
    expect(nestedDeeperThan([], 1)).toBe(false);
    expect(nestedDeeperThan({ a: [1, { b: 2 }] }, 2)).toBe(true);
    expect(nestedDeeperThan({ a: [1, { b: 2 }] }, 3)).toBe(false);
    expect(nestedDeeperThan({ a: 1, deep: JSON.parse('['.repeat(65) + ']'.repeat(65)) as unknown }, 64)).toBe(true);
  });

  it('answers for a value nested far past what JSON.stringify survives, without running out of stack', () => {
    const deep: unknown = JSON.parse('['.repeat(100_000) + ']'.repeat(100_000));
    expect(() => JSON.stringify(deep)).toThrow(RangeError);
    expect(nestedDeeperThan(deep, MAX_CANONICAL_DEPTH)).toBe(true);
    expect(nestedDeeperThan({ wide: Array.from({ length: 10_000 }, (_, i) => ({ i })) }, MAX_CANONICAL_DEPTH)).toBe(false);
  });
});

describe('sha256Hex', () => {
  it('hashes UTF-8 text to lowercase hex', () => {
    expect(sha256Hex('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('é')).toBe(createHash('sha256').update(Buffer.from('é', 'utf8')).digest('hex'));
    expect(sha256Hex('abc')).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('actionDigest', () => {
  const base = { toolName: 'shopify_refund', action: 'create', params: { orderId: '1', amount: '10.00' } };
  const key = Buffer.alloc(32, 7);
  const text = '{"action":"create","params":{"amount":"10.00","orderId":"1"},"toolName":"shopify_refund"}';

  it('is the HMAC-SHA256, under the org key, of the canonical JSON of {toolName, action, params}', () => {
    expect(actionDigest(base, key)).toBe(createHmac('sha256', key).update(text, 'utf8').digest('hex'));
    expect(actionDigest(base, key)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('is not the unkeyed sha256 (no offline oracle for a redacted param), which unkeyedActionDigest still computes for legacy rows', () => {
    expect(unkeyedActionDigest(base)).toBe(sha256Hex(text));
    expect(actionDigest(base, key)).not.toBe(unkeyedActionDigest(base));
  });

  it('differs under another key (another org)', () => {
    expect(actionDigest(base, Buffer.alloc(32, 8))).not.toBe(actionDigest(base, key));
  });

  it('refuses a key shorter than 32 bytes', () => {
    expect(() => actionDigest(base, Buffer.alloc(16))).toThrow(/32 bytes/);
  });

  it('ignores param key order', () => {
    expect(actionDigest({ ...base, params: { amount: '10.00', orderId: '1' } }, key)).toBe(actionDigest(base, key));
  });

  it('changes with any part of the action', () => {
    const d = actionDigest(base, key);
    expect(actionDigest({ ...base, toolName: 'shopify_order' }, key)).not.toBe(d);
    expect(actionDigest({ ...base, action: 'get' }, key)).not.toBe(d);
    expect(actionDigest({ ...base, params: { orderId: '1', amount: '10.01' } }, key)).not.toBe(d);
    expect(actionDigest({ ...base, params: { orderId: '1', amount: 10 } }, key)).not.toBe(d);
  });

  it('covers only toolName, action and params', () => {
    const withExtra = { ...base, correlationId: 'abc' } as typeof base;
    expect(actionDigest(withExtra, key)).toBe(actionDigest(base, key));
    expect(unkeyedActionDigest(withExtra)).toBe(unkeyedActionDigest(base));
  });
});
