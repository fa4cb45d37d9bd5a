import { TOOL_CALL_VIEW_FIELDS, type ToolCallView } from '../tool-calls/tool-call.view.js';

export type ExportFormat = 'ndjson' | 'csv';

export const EXPORT_CONTENT_TYPES: Record<ExportFormat, string> = {
  ndjson: 'application/x-ndjson; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
};

/** RFC 4180: a cell holding a comma, quote, CR or LF is quoted, with quotes doubled. */
export function csvCell(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'object' ? JSON.stringify(value) : String(value);
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
