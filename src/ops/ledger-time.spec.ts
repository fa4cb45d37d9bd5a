import { describe, expect, it } from 'vitest';
import { assertTimeWindow, parseQueryTimestamp } from './ledger-time.js';
import { csvCell, csvJsonCell, ndjsonLine } from './tool-calls-export.format.js';
import type { ToolCallView } from '../tool-calls/tool-call.view.js';

describe('parseQueryTimestamp', () => {
  it('keeps microseconds and offsets, and reads missing parts as UTC midnight', () => {
    expect(parseQueryTimestamp('since', '2026-01-02T03:04:05.123456Z')).toBe('2026-01-02T03:04:05.123456Z');
    expect(parseQueryTimestamp('since', '2026-01-02T03:04:05+02:00')).toBe('2026-01-02T03:04:05+02:00');
    expect(parseQueryTimestamp('since', '2026-01-02')).toBe('2026-01-02T00:00:00Z');
    expect(parseQueryTimestamp('since', '2026-01-02T03:04')).toBe('2026-01-02T03:04:00Z');
    expect(parseQueryTimestamp('since', undefined)).toBeUndefined();
    // A "+" typed unescaped in a URL query arrives as a space: at the zone's place it can only be "+".
    expect(parseQueryTimestamp('since', '2026-01-02T03:04:05 02:00')).toBe('2026-01-02T03:04:05+02:00');
    expect(parseQueryTimestamp('since', '2026-01-02T03:04:05.5 02:00')).toBe('2026-01-02T03:04:05.5+02:00');
    expect(parseQueryTimestamp('since', '2026-01-02T03:04 05:30')).toBe('2026-01-02T03:04:00+05:30');
    for (const bad of ['2026-01-02T03:04:05  02:00', '2026-01-02T03:04:05 02', '2026-01-02 03:04:05 02:00', ' 2026-01-02T03:04:05 02:00']) {
      expect(() => parseQueryTimestamp('since', bad), bad).toThrow(/ISO-8601/);
    }
    // the calendar's edges that PostgreSQL accepts (year 1, an offset reaching back into 1 BC, year 9999)
    expect(parseQueryTimestamp('since', '0001-01-01')).toBe('0001-01-01T00:00:00Z');
    expect(parseQueryTimestamp('since', '0001-01-01T00:00:00+01:00')).toBe('0001-01-01T00:00:00+01:00');
    expect(parseQueryTimestamp('since', '9999-12-31T23:59:59.999999Z')).toBe('9999-12-31T23:59:59.999999Z');
  });

  it('takes a fraction finer than microseconds (RFC 3339 nanoseconds) as the next microsecond up, in UTC', () => {
    expect(parseQueryTimestamp('since', '2026-01-31T12:00:00.123456789Z')).toBe('2026-01-31T12:00:00.123457Z');
    expect(parseQueryTimestamp('since', '2026-01-31T12:00:00.123456000Z')).toBe('2026-01-31T12:00:00.123456Z');
    expect(parseQueryTimestamp('since', '2026-01-31T12:00:00.1234567+02:00')).toBe('2026-01-31T10:00:00.123457Z');
    expect(parseQueryTimestamp('since', '2026-12-31T23:59:59.9999999Z')).toBe('2027-01-01T00:00:00.000000Z');
    expect(parseQueryTimestamp('since', '1969-12-31T23:59:59.9999991Z')).toBe('1970-01-01T00:00:00.000000Z');
    expect(parseQueryTimestamp('since', '1969-12-31T23:59:59.9989991Z')).toBe('1969-12-31T23:59:59.999000Z');
  });

  it('takes an "end of time" past 9999 in UTC as PostgreSQL reads it (usage review: .NET DateTime.MaxValue, nanosecond clocks were 400)', () => {
    expect(parseQueryTimestamp('to', '9999-12-31T23:59:59.9999999Z')).toBe('10000-01-01T00:00:00.000000Z');
    expect(parseQueryTimestamp('to', '9999-12-31T23:59:59.999999999Z')).toBe('10000-01-01T00:00:00.000000Z');
    expect(parseQueryTimestamp('to', '9999-12-31T23:59:59.9999999-05:00')).toBe('10000-01-01T05:00:00.000000Z');
    expect(parseQueryTimestamp('to', '9999-12-31T23:59:59.999999Z')).toBe('9999-12-31T23:59:59.999999Z'); // no finer digits: as sent
    // The window check reads both spellings.
    expect(() => assertTimeWindow('from', '9999-12-31T23:59:59.999999Z', 'to', '10000-01-01T00:00:00.000000Z')).not.toThrow();
    expect(() => assertTimeWindow('from', '10000-01-01T00:00:00.000001Z', 'to', '10000-01-01T00:00:00.000000Z')).toThrow(/from/);
    expect(() => assertTimeWindow('from', '2026-01-01T00:00:00Z', 'to', '10000-01-01T05:00:00.000000Z')).not.toThrow();
  });

  it('refuses what is not a real instant', () => {
    for (const bad of ['', 'now', '2026-02-30', '2026-13-01', '2026-01-01T24:00:00Z', '2026-01-01T00:60Z', '2026-01-01T00:00:0012Z',
      '0001-01-01T00:30:00.0000001+01:00',
      '2026-01-01 00:00:00', '2026-01-01T00:00:00+25:00', "2026-01-01'; DROP TABLE x; --", '20260101',
      '0000-01-01', '0000-12-31T23:59:59Z', '0000-06-01T00:00:00+01:00']) {
      expect(() => parseQueryTimestamp('since', bad), bad).toThrow(/since/);
    }
  });
});

describe('csvCell', () => {
  it('quotes only when needed and doubles quotes; objects become JSON', () => {
    expect(csvCell(null)).toBe('');
    expect(csvCell(42)).toBe('42');
    expect(csvCell('plain')).toBe('plain');
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('say "hi"')).toBe('"say ""hi"""');
    expect(csvCell('l1\r\nl2')).toBe('"l1\r\nl2"');
    expect(csvCell({ a: 'x,"y"' })).toBe('"{""a"":""x,\\""y\\""""}"');
  });

  it('defuses text a spreadsheet would evaluate, and leaves numbers and JSON alone', () => {
    expect(csvCell('=HYPERLINK("http://evil.example","x")')).toBe('"\'=HYPERLINK(""http://evil.example"",""x"")"');
    expect(csvCell('+1+1')).toBe("'+1+1");
    expect(csvCell('-2+3')).toBe("'-2+3");
    expect(csvCell('@SUM(A1)')).toBe("'@SUM(A1)");
    expect(csvCell('\tcmd')).toBe('"\'\tcmd"'); // quoted too: a TAB is a separator to some readers
    expect(csvCell('\r=1')).toBe('"\'\r=1"');
    expect(csvCell('＝HYPERLINK("http://evil.example")')).toBe('"\'＝HYPERLINK(""http://evil.example"")"');
    expect(csvCell('＋1')).toBe("'＋1");
    expect(csvCell('－1')).toBe("'－1");
    expect(csvCell('＠SUM(A1)')).toBe("'＠SUM(A1)");
    expect(csvCell('a=b')).toBe('a=b');
    expect(csvCell(-5)).toBe('-5');
    expect(csvCell({ note: '=1+1' })).toBe('"{""note"":""=1+1""}"');
    expect(csvCell(['=x'])).toBe('"[""=x""]"');
  });

  it('defuses a formula after leading blanks too (a reader that trims cells would evaluate it)', () => {
    expect(csvCell(' =1+1')).toBe("' =1+1");
    expect(csvCell('\u3000=1+1')).toBe("'\u3000=1+1");
    expect(csvCell('  @SUM(A1)')).toBe("'  @SUM(A1)");
    expect(csvCell(' plain')).toBe(' plain');
    expect(csvCell(' -')).toBe("' -");
  });
});

describe('csvJsonCell', () => {
  it('is always the JSON text: a string stays distinguishable from the number, array or object it spells', () => {
    const cells = [[1, 2], '[1,2]', 5, '5', { a: 1 }, '{"a":1}', '=1+1', -5, true, 'true'].map(csvJsonCell);
    expect(cells).toEqual(['"[1,2]"', '"""[1,2]"""', '5', '"""5"""', '"{""a"":1}"', '"""{\\""a\\"":1}"""', '"""=1+1"""', '-5', 'true', '"""true"""']);
    expect(new Set(cells).size).toBe(cells.length);
    expect(csvJsonCell(null)).toBe('');
  });
});

describe('ndjsonLine', () => {
  it('one line per row, U+0085/U+2028/U+2029 escaped (Unicode-aware line splitters would cut the row there), the same JSON value', () => {
    const v = { id: 'x', errorText: 'a\u2028b\u2029c\nd\u0085e', inputRedacted: { note: '\u2028' } } as unknown as ToolCallView;
    const line = ndjsonLine(v);
    expect(line.endsWith('\n')).toBe(true);
    expect(line.slice(0, -1)).not.toMatch(/[\n\r\u2028\u2029\u0085]/);
    expect(line.slice(0, -1).split(/\r\n|[\n\r\u2028\u2029\u0085]/)).toHaveLength(1);
    expect(JSON.parse(line)).toEqual(v);
  });
});
