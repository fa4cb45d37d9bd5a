/**
 * The model-facing text of a result within a byte budget. Over budget, the JSON
 * text is cut at a UTF-8 character boundary and a note says where the rest is.
 */
export interface ModelContent {
  content: string;
  truncated: boolean;
  fullBytes: number;
}

export function truncationNote(fullBytes: number, shownBytes: number, toolCallId: string): string {
  return `\n[truncated: the result is ${fullBytes} bytes of JSON and only the first ${shownBytes} are shown. The full result is available from GET /v1/tool-calls/${toolCallId}/result]`;
}

/** The longest prefix of `text` that is at most `maxBytes` of UTF-8, never splitting a character. */
export function utf8Prefix(text: string, maxBytes: number): string {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= maxBytes) return text;
  let end = Math.max(0, maxBytes);
  // Step back over continuation bytes (10xxxxxx) to the start of a character.
  while (end > 0 && (buf[end] & 0xc0) === 0x80) end--;
  return buf.subarray(0, end).toString('utf8');
}

export function renderForModel(json: string, budgetBytes: number, toolCallId: string): ModelContent {
  const fullBytes = Buffer.byteLength(json, 'utf8');
  if (fullBytes <= budgetBytes) return { content: json, truncated: false, fullBytes };
  const noteBytes = Buffer.byteLength(truncationNote(fullBytes, fullBytes, toolCallId), 'utf8');
  const shown = utf8Prefix(json, Math.max(0, budgetBytes - noteBytes));
  const shownBytes = Buffer.byteLength(shown, 'utf8');
  return { content: shown + truncationNote(fullBytes, shownBytes, toolCallId), truncated: true, fullBytes };
}
