import { describe, expect, it } from 'vitest';
import { csvCell, csvJsonCell } from '../../src/ops/tool-calls-export.format.js';
import { parseCsv } from '../support/csv.js';

/** A line of cells as a spreadsheet whose list separator is `sep` reads it. */
const cells = (line: string, sep: string): string[] => parseCsv(`${line}\r\n`, sep)[0];

describe('CSV cells of the ledger export', () => {
  it('a formula behind a ; or TAB stays inside its quoted cell, whatever separator the reader splits at (Excel in de/fr splits at ;)', () => {
    for (const text of ["lookup;=cmd|'/Ccalc'!A0;", 'lookup\t=2+5\t', 'a;@SUM(1)']) {
      const line = [csvCell('x'), csvCell(text), csvCell('y')].join(',');
      for (const sep of [',', ';', '\t']) {
        // Read with any of the three separators, no cell a reader evaluates starts like a formula.
        expect(cells(line, sep).filter((c) => /^[=+\-@]/.test(c)), `${JSON.stringify(text)} read at ${JSON.stringify(sep)}`).toEqual([]);
      }
      expect(cells(line, ',')).toEqual(['x', text, 'y']); // and read as written, the text is whole
    }
  });

  it('Unicode line breaks are quoted, as NDJSON escapes them: a line reader splitting the Unicode way cannot cut the row outside a quote', () => {
    for (const ch of ['\u000b', '\u000c', '\u001c', '\u001d', '\u001e', '\u0085', '\u2028', '\u2029']) {
      expect(csvCell(`lookup${ch}=2+5`)).toBe(`"lookup${ch}=2+5"`);
    }
  });

  it('plain text is written bare; a leading formula sign gets its quote mark; quotes are doubled; JSON cells are quoted as before', () => {
    expect(csvCell('order_lookup')).toBe('order_lookup');
    expect(csvCell('=1+1')).toBe("'=1+1");
    expect(csvCell('=1;2')).toBe(`"'=1;2"`);
    expect(csvCell('say "hi"')).toBe('"say ""hi"""');
    expect(csvCell(42)).toBe('42');
    expect(csvJsonCell({ a: 'b;c' })).toBe('"{""a"":""b;c""}"');
  });
});
