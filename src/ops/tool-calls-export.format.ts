import { TOOL_CALL_VIEW_FIELDS, type ToolCallView } from '../tool-calls/tool-call.view.js';

export type ExportFormat = 'ndjson' | 'csv';

export const EXPORT_CONTENT_TYPES: Record<ExportFormat, string> = {
  ndjson: 'application/x-ndjson; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
};

/**
 * A text cell a spreadsheet would read as a formula (OWASP "CSV injection"), also written with the full-width signs
 * (＝ ＋ － ＠) an East Asian input method types, which a spreadsheet in such a locale may read as their ASCII twins: a
 * leading `'` costs a reader nothing. After blanks too (" =1+1", an ideographic space first): a reader that trims
 * cells (LibreOffice's "Trim spaces") would evaluate what follows.
 */
const FORMULA_START = /^[\s\u3000]*[=+\-@\t\r\uff1d\uff0b\uff0d\uff20]/;

/**
 * RFC 4180: a cell holding a comma, quote, CR or LF is quoted, with quotes doubled.
 * A string that starts like a formula (= + - @ TAB CR, or full-width ＝ ＋ － ＠) gets a leading `'`, so a
 * spreadsheet opening the export shows it as text instead of evaluating it: error
 * texts and specialist ids come from vendors and agents. Numbers and JSON cells are
 * never prefixed (a JSON cell starts with `{`, `[` or `"`).
 */
export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  if (typeof value === 'string' && FORMULA_START.test(text)) text = `'${text}`;
  return rfc4180(text);
}

/**
 * RFC 4180: quoted when it holds a comma, quote, CR or LF, with quotes doubled. Also when it holds what another reader
 * splits at (injection review): `;` (Excel's list separator in de, fr, nl… locales) and TAB, where "lookup;=cmd|…"
 * written bare became a second cell starting "=", evaluated; and the Unicode line breaks (VT, FF, FS, GS, RS, U+0085,
 * U+2028, U+2029) at which a reader that splits lines the Unicode way would cut the row, as the NDJSON lines escape.
 * Quoted, a cell stays whole whatever the reader splits at.
 */
// eslint-disable-next-line no-control-regex
const QUOTED = /[",;\t\r\n\u000b\u000c\u001c-\u001e\u0085\u2028\u2029]/;
const rfc4180 = (text: string): string => (QUOTED.test(text) ? `"${text.replace(/"/g, '""')}"` : text);

/**
 * A cell of a JSON column (inputRedacted, outputRedacted: any JSON value): always its JSON text, so the text "[1,2]"
 * (a Nango upstream answering text/plain) is `"[1,2]"` and the array `[1,2]`: read back as JSON, each is what the
 * ledger holds. No value is empty. Never formula-prefixed: a JSON string starts with `"`, and a number is a number.
 */
export function csvJsonCell(value: unknown): string {
  return value === null || value === undefined ? '' : rfc4180(JSON.stringify(value));
}

const JSON_FIELDS: ReadonlySet<keyof ToolCallView> = new Set(['inputRedacted', 'outputRedacted']);

export const csvHeader = (): string => `${TOOL_CALL_VIEW_FIELDS.join(',')}\r\n`;

export const csvLine = (v: ToolCallView): string =>
  `${TOOL_CALL_VIEW_FIELDS.map((f) => (JSON_FIELDS.has(f) ? csvJsonCell(v[f]) : csvCell(v[f]))).join(',')}\r\n`;

/**
 * One JSON object per line. U+0085, U+2028 and U+2029 are escaped (JSON.stringify escapes the C0 controls only): valid
 * raw in JSON, but line breaks to readers that split lines the Unicode way (Python's splitlines, some log shippers),
 * which would cut such a row in two (export review).
 */
export const ndjsonLine = (v: ToolCallView): string =>
  `${JSON.stringify(v).replace(/[\u0085\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}\n`;

/** About how many characters of export text go to the stream at once. */
const EXPORT_CHUNK_CHARS = 64 * 1024;

/** A piece of export text and how many rows it holds (whole rows only). */
export interface ExportChunk {
  text: string;
  rows: number;
}

/**
 * The text of rows in the chosen format, rows joined into chunks of about EXPORT_CHUNK_CHARS (a longer row is a
 * chunk alone): never one string for a whole batch, which large rows would take past V8's string limit. Each chunk
 * says how many rows it holds, so an export stopped between two chunks knows how many it sent.
 */
export function* exportChunks(format: ExportFormat, views: Iterable<ToolCallView>): Generator<ExportChunk> {
  const line = format === 'csv' ? csvLine : ndjsonLine;
  let out = '';
  let rows = 0;
  for (const v of views) {
    const text = line(v);
    if (out.length > 0 && out.length + text.length > EXPORT_CHUNK_CHARS) {
      yield { text: out, rows };
      out = '';
      rows = 0;
    }
    out += text;
    rows++;
  }
  if (out.length > 0) yield { text: out, rows };
}

/**
 * Why an export was cut short: its database failed, the gateway is stopping (HttpDrain's beforeBackstop), or the API key
 * it was requested with was revoked while it streamed.
 */
export type ExportCut = 'database' | 'stopping' | 'revoked';

/** Each cause in the CSV line's words (no comma or quote: the line stays one cell) and in the NDJSON detail's. */
const CUT_WORDS: Record<ExportCut, { csv: string; ndjson: string }> = {
  database: { csv: 'when the database failed', ndjson: 'the database failed' },
  stopping: { csv: 'when the gateway was stopping', ndjson: 'the gateway is stopping' },
  revoked: { csv: 'when its API key was revoked', ndjson: 'its API key was revoked' },
};

/**
 * The last line of an export cut short where the body's end cannot say so (HTTP/1.0: only the connection's close
 * ends it), by a failure or by the gateway stopping: NDJSON an object that is no tool call,
 * `{"exportIncomplete": true, "rows": N, "detail": …}`; CSV a one-cell row starting `#export incomplete`. A reader that
 * checks for it knows the file is partial; one that does not fails on a line unlike the others instead of silently
 * taking a part of the ledger for the whole.
 */
export function incompleteExportLine(format: ExportFormat, rows: number, cut: ExportCut = 'database'): string {
  const words = CUT_WORDS[cut];
  if (format === 'csv') return `#export incomplete - it stopped after ${rows} rows ${words.csv} - request it again\r\n`; // one cell: no comma or quote
  return `${JSON.stringify({ exportIncomplete: true, rows, detail: `the export stopped after ${rows} rows (${words.ndjson}): this file is incomplete; request it again` })}\n`;
}
