/**
 * An RFC 4180 reader, enough to read the ledger export back: quoted cells with doubled quotes and embedded CR/LF,
 * CRLF rows. `separator` is the one a spreadsheet splits at (`,`; `;` in de, fr, nl… locales; TAB). Text that does not
 * end its last row with CRLF is refused: a cut export must not read as a whole one.
 */
export function parseCsv(text: string, separator = ','): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  const endCell = (): void => {
    row.push(cell);
    cell = '';
  };
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === separator) endCell();
    else if (ch === '\r' && text[i + 1] === '\n') {
      endCell();
      rows.push(row);
      row = [];
      i++;
    } else cell += ch;
  }
  if (cell || row.length) throw new Error('CSV does not end with CRLF');
  return rows;
}
