import { describe, expect, it } from 'vitest';
import { LEDGER_OUTPUT_MAX_BYTES, LEDGER_OUTPUT_PREVIEW_BYTES, ledgerOutputJson, type TruncatedLedgerOutput } from './ledger-output-cap.js';

const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

describe('ledgerOutputJson', () => {
  it('keeps a result up to the cap as its own JSON, null included', () => {
    const value = { items: ['a'.repeat(LEDGER_OUTPUT_MAX_BYTES - 20)] };
    expect(bytes(JSON.stringify(value))).toBeLessThanOrEqual(LEDGER_OUTPUT_MAX_BYTES);
    expect(ledgerOutputJson(value)).toBe(JSON.stringify(value));
    expect(ledgerOutputJson(null)).toBe('null');
  });

  it('keeps a stub for a result over the cap: its size and the start of its JSON text', () => {
    const value = { items: Array.from({ length: 2000 }, (_, i) => ({ id: i, email: '[REDACTED]', note: 'n'.repeat(40) })) };
    const text = JSON.stringify(value);
    const stub = JSON.parse(ledgerOutputJson(value)) as TruncatedLedgerOutput;
    expect(stub.truncated).toBe(true);
    expect(stub.bytes).toBe(bytes(text));
    expect(text.startsWith(stub.preview)).toBe(true);
    expect(bytes(stub.preview)).toBeLessThanOrEqual(LEDGER_OUTPUT_PREVIEW_BYTES);
    expect(bytes(stub.preview)).toBeGreaterThan(LEDGER_OUTPUT_PREVIEW_BYTES - 100); // one item at most given up
  });

  it('cuts the preview between values: a number is never shown cut, as a smaller whole one', () => {
    const value = { refunds: Array.from({ length: 20_000 }, (_, i) => ({ amount: 123456789 + i })) };
    const stub = JSON.parse(ledgerOutputJson(value)) as TruncatedLedgerOutput;
    expect(stub.preview).toMatch(/[,[{]$/);
    const shown = [...stub.preview.matchAll(/"amount":(\d+)/g)].map((m) => Number(m[1]));
    expect(shown.length).toBeGreaterThan(100);
    expect(shown.every((n, i) => n === 123456789 + i)).toBe(true);
  });

  it('cuts the preview between characters, never inside a multi-byte one or a surrogate pair', () => {
    // '{"s":"' is 6 bytes, then 4-byte characters: the preview budget (16384) falls 2 bytes into one.
    const value = { s: '😀'.repeat(20_000) };
    const text = JSON.stringify(value);
    expect((LEDGER_OUTPUT_PREVIEW_BYTES - 6) % 4).not.toBe(0);
    const stub = JSON.parse(ledgerOutputJson(value)) as TruncatedLedgerOutput;
    expect(stub.preview).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/);
    expect(stub.preview).not.toContain('\uFFFD');
    expect(text.startsWith(stub.preview)).toBe(true);
    expect(bytes(stub.preview)).toBe(6 + Math.floor((LEDGER_OUTPUT_PREVIEW_BYTES - 6) / 4) * 4);
  });

  it('a stub stays under the cap even when every character of its preview is escaped again', () => {
    const value = { q: '"\\'.repeat(100_000), c: '\u0001'.repeat(100_000) };
    const stored = ledgerOutputJson(value);
    expect(bytes(stored)).toBeLessThanOrEqual(LEDGER_OUTPUT_MAX_BYTES);
    expect((JSON.parse(stored) as TruncatedLedgerOutput).truncated).toBe(true);
  });
});
