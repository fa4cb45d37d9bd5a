import { describe, expect, it } from 'vitest';
import { renderForModel, utf8Prefix } from './result-budget.js';

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
});
