import { describe, expect, it } from 'vitest';
import { CUT_STRING_MIN_CHARS, jsonPrefix, renderForModel, truncationNote, utf8Prefix } from './result-budget.js';

describe('result budget', () => {
  it('keeps a result within budget as it is', () => {
    const json = JSON.stringify({ a: 1 });
    expect(renderForModel(json, 100, 'id')).toEqual({ content: json, truncated: false, fullBytes: json.length });
  });

  it('truncates within the budget and says where the rest is', () => {
    const json = JSON.stringify({ items: 'x'.repeat(5_000) });
    const r = renderForModel(json, 1_000, 'abc');
    expect(r.truncated).toBe(true);
    expect(Buffer.byteLength(r.content)).toBeLessThanOrEqual(1_000);
    expect(r.content).toContain('/v1/tool-calls/abc/result');
    expect(r.fullBytes).toBe(json.length);
  });

  it('never splits a UTF-8 character', () => {
    const text = 'é'.repeat(10) + '😀'.repeat(10);
    for (let n = 0; n < Buffer.byteLength(text); n++) {
      const p = utf8Prefix(text, n);
      expect(Buffer.byteLength(p)).toBeLessThanOrEqual(n);
      expect(p).not.toContain('\uFFFD');
      expect(text.startsWith(p)).toBe(true);
    }
  });

  it('cuts a JSON result between values at every budget: never inside a number, a literal, a key or a short string', () => {
    const json = JSON.stringify({
      data: [{ id: 're_1', amount: 123456, price: '19.99', refunded: true, note: null, ratio: -1.5e-7 }, { id: 're_2', amount: 7 }],
      total: 123463,
    });
    for (let n = 0; n <= Buffer.byteLength(json); n++) {
      const shown = jsonPrefix(json, n);
      expect(json.startsWith(shown)).toBe(true);
      expect(Buffer.byteLength(shown)).toBeLessThanOrEqual(n);
      // Whole, or ending right after a , [ or { (before: "amount":12 of "amount":123456, "price":"19.9 of "19.99").
      if (shown !== json) expect(shown === '' || /[,[{]$/.test(shown), `at ${n}: ${shown.slice(-16)}`).toBe(true);
    }
  });

  it('the model is shown "amount":123456 whole or not at all, with the note', () => {
    const json = JSON.stringify({ lead: 'p'.repeat(300), data: [{ id: 're_1', amount: 123456, currency: 'usd' }], tail: 't'.repeat(1000) });
    const full = Buffer.byteLength(json);
    const budget = json.indexOf('123456') + 2 + Buffer.byteLength(truncationNote(full, full, 'abc')); // a byte cut would fall after "12"
    const r = renderForModel(json, budget, 'abc');
    expect(r.truncated).toBe(true);
    expect(r.content).toMatch(/"data":\[\{"id":"re_1",\n\[truncated: the result is \d+ bytes of JSON and only the first \d+ are shown/);
  });

  it('a long string may be cut inside (one large value would leave nothing), never in the middle of an escape', () => {
    const long = JSON.stringify({ description: `${'word '.repeat(100)}\u00e9 \\ "quoted" ${'more '.repeat(100)}` });
    for (let n = CUT_STRING_MIN_CHARS + 20; n < long.length; n++) {
      const shown = jsonPrefix(long, n);
      expect(long.startsWith(shown)).toBe(true);
      expect(shown.length, `at ${n}`).toBeGreaterThan(CUT_STRING_MIN_CHARS);
      // No cut escape: a trailing backslash run is even, and no \u lacks its digits.
      expect(/(^|[^\\])(\\\\)*\\$/.test(shown), `at ${n}: ${shown.slice(-8)}`).toBe(false);
      expect(/\\u[0-9a-f]{0,3}$/.test(shown), `at ${n}: ${shown.slice(-8)}`).toBe(false);
    }
    // A short string is shown whole or not at all.
    expect(jsonPrefix(JSON.stringify({ a: 1, price: '19.99 USD' }), 20)).toBe('{"a":1,');
  });
});
