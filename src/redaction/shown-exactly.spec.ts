import { describe, expect, it } from 'vitest';
import { redactInput, REDACTION_LIMITS } from './redaction.service.js';
import { shownExactly } from './shown-exactly.js';

const shown = (params: unknown) => shownExactly(params, redactInput(params));

describe('shownExactly: is the redacted input the input itself?', () => {
  it('plain params, nested objects and arrays, numbers and a marker written as text: yes', () => {
    expect(shown({ orderId: '12345', amount: '25.00', note: 'thanks' })).toBe(true);
    expect(shown({ path: '/v1/users/42/role', body: { role: 'owner', tags: ['a', 'b'], n: 1.5, ok: true, none: null } })).toBe(true);
    expect(shown({ body: { note: '[REDACTED]', other: '…[Truncated]' } })).toBe(true); // what the caller wrote is what runs
  });

  it('a hidden value, under a secret-looking name or by its shape: no', () => {
    expect(shown({ body: { token_scope: 'admin' } })).toBe(false);
    expect(shown({ body: { channel: '4242424242424242' } })).toBe(false);
    expect(shown({ body: { note: 'key sk_live_0123456789abcdefghijklmnop' } })).toBe(false);
  });

  it('a cut value (a long text, a long array): no', () => {
    expect(shown({ body: { text: 'x'.repeat(REDACTION_LIMITS.maxStringLength + 1) } })).toBe(false);
    expect(shown({ body: { items: Array.from({ length: 1_001 }, (_, i) => i) } })).toBe(false);
  });

  it('a replaced character (NUL, an unpaired surrogate, shown as U+FFFD): no', () => {
    expect(shown({ body: { amount: '100\u00000' } })).toBe(false);
    expect(shown({ body: { text: 'pay\ud800' } })).toBe(false);
    expect(shown({ body: { text: 'pay\uFFFD' } })).toBe(true); // a real U+FFFD is itself
  });

  it('compares structure, not spelling: a member more or less, another type, another order of array items', () => {
    expect(shownExactly({ a: 1 }, { a: 1, b: 2 })).toBe(false);
    expect(shownExactly({ a: 1, b: undefined }, { a: 1, c: undefined })).toBe(false);
    expect(shownExactly({ a: '1' }, { a: 1 })).toBe(false);
    expect(shownExactly([1, 2], [2, 1])).toBe(false);
    expect(shownExactly([], {})).toBe(false);
    expect(shownExactly({ b: 1, a: 2 }, { a: 2, b: 1 })).toBe(true);
  });
});
