import { TOOL_CALL_VIEW_FIELDS, type ToolCallView } from '../tool-calls/tool-call.view.js';

export type ExportFormat = 'ndjson' | 'csv';

export const EXPORT_CONTENT_TYPES: Record<ExportFormat, string> = {
  ndjson: 'application/x-ndjson; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
};

/** A text cell a spreadsheet would read as a formula (OWASP "CSV injection"). */
const FORMULA_START = /^[=+\-@\t\r]/;

/**
 * RFC 4180: a cell holding a comma, quote, CR or LF is quoted, with quotes doubled.
 * A string that starts like a formula (= + - @ TAB CR) gets a leading `'`, so a
 * spreadsheet opening the export shows it as text instead of evaluating it: error
 * texts and specialist ids come from vendors and agents. Numbers and JSON cells are
 * never prefixed (a JSON cell starts with `{`, `[` or `"`).
 */
export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  if (typeof value === 'string' && FORMULA_START.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export const csvHeader = (): string => `${TOOL_CALL_VIEW_FIELDS.join(',')}\r\n`;

export const csvLine = (v: ToolCallView): string => `${TOOL_CALL_VIEW_FIELDS.map((f) => csvCell(v[f])).join(',')}\r\n`;

export const ndjsonLine = (v: ToolCallView): string => `${JSON.stringify(v)}\n`;

/** The text of one batch of rows in the chosen format. */
export function exportChunk(format: ExportFormat, views: ToolCallView[]): string {
  const line = format === 'csv' ? csvLine : ndjsonLine;
  let out = '';
  for (const v of views) out += line(v);
  return out;
}
