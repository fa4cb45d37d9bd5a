import { describe, expect, it } from 'vitest';
import { LEDGER_OUTPUT_MAX_BYTES, LEDGER_OUTPUT_PREVIEW_BYTES, ledgerOutputJson, storedJsonBytes, type TruncatedLedgerOutput } from './ledger-output-cap.js';

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

  /**
   * jsonb prints a number with every digit and a blank after each "," and ":": 800 × 1e308 is 5.6 KB of JSON and was
   * stored as 249 KB (octet_length(output_redacted::text), by which listing pages are sized), four times the cap.
   */
  it('measures the result as jsonb stores it: 800 × 1e308 (5.6 KB of JSON) is kept as a stub', () => {
    const value = { readings: Array<number>(800).fill(1e308) };
    const text = JSON.stringify(value);
    expect(bytes(text)).toBeLessThan(6_000);
    expect(storedJsonBytes(text, bytes(text))).toBe(bytes(`{"readings": []}`) + 800 * 309 + 799 * 2); // what PostgreSQL stored: 248,814
    const stub = JSON.parse(ledgerOutputJson(value)) as TruncatedLedgerOutput;
    expect(stub).toMatchObject({ truncated: true, bytes: bytes(text) });
    expect(text.startsWith(stub.preview)).toBe(true);
  });

  it('counts the blanks jsonb writes after "," and ":": a dense list under the cap as JSON, over it as stored, is a stub', () => {
    const value = Array.from({ length: 25_000 }, (_, i) => i % 10); // 50 KB of JSON, and 25 KB of blanks stored
    const text = JSON.stringify(value);
    expect(bytes(text)).toBeLessThan(LEDGER_OUTPUT_MAX_BYTES);
    expect(storedJsonBytes(text, bytes(text))).toBe(bytes(text) + 24_999);
    expect((JSON.parse(ledgerOutputJson(value)) as TruncatedLedgerOutput).truncated).toBe(true);
  });

  it('what is no number or separator is not counted: commas, colons and "e+" inside strings, true and false', () => {
    const text = JSON.stringify({ s: 'a,b:c 1e+308 "q" \\', t: true, f: false, n: -1.5e-7, m: 12.5e3, k: [1e21, 0] });
    // {"s": "…", "t": true, "f": false, "n": -0.00000015, "m": 12500, "k": [1000000000000000000000, 0]}: 6 ":", 6 ","
    const expected = bytes(text) + 12 + (jsonbLength(-1.5e-7) - String(-1.5e-7).length) + (22 - String(1e21).length);
    expect(storedJsonBytes(text, bytes(text))).toBe(expected);
  });
});

/** Characters PostgreSQL prints for these numbers (jsonb's exact decimal). */
function jsonbLength(n: number): number {
  return n === -1.5e-7 ? '-0.00000015'.length : String(n).length;
}
