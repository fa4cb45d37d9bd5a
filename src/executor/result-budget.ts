/**
 * The model-facing text of a result within a byte budget. Over budget, the JSON
 * text is cut between values (jsonPrefix) and a note says where the rest is.
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

/** A string longer than this may be cut inside (text, a blob: it reads as cut); a shorter one is shown whole or not at all. */
export const CUT_STRING_MIN_CHARS = 256;

/**
 * The longest prefix of the JSON text `json` within `maxBytes` (utf8Prefix) that ends between values: after a `,`,
 * `[` or `{` outside any string, so what is shown never ends in a cut number, literal, key or short string. Cut at a
 * byte, `"amount":123456` (1,234.56 in cents) showed the model `"amount":12`, a smaller amount that reads as whole (a
 * money reviewer's finding). A long string (over CUT_STRING_MIN_CHARS, or one `json` itself ends inside: already cut)
 * may be cut inside, never in the middle of an escape: one large value would otherwise leave nothing to show.
 */
export function jsonPrefix(json: string, maxBytes: number): string {
  const prefix = utf8Prefix(json, maxBytes);
  if (prefix.length === json.length) return json;
  let boundary = 0;
  let inString = false;
  let stringStart = 0;
  let escapeAt = -1; // the backslash of the string's last escape
  for (let i = 0; i < prefix.length; i++) {
    const c = prefix.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) {
        escapeAt = i;
        i++; // the escaped character (\uXXXX: its hex digits are no quote or backslash)
      } else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
      stringStart = i;
      escapeAt = -1;
    } else if (c === 0x2c || c === 0x5b || c === 0x7b) boundary = i + 1; // , [ {
  }
  if (inString && stringLength(json, stringStart) > CUT_STRING_MIN_CHARS) {
    const escapeEnd = escapeAt < 0 ? 0 : escapeAt + (prefix[escapeAt + 1] === 'u' ? 6 : 2);
    return escapeEnd > prefix.length ? prefix.slice(0, escapeAt) : prefix;
  }
  return prefix.slice(0, boundary);
}

/** The length of the JSON string literal opening at `start` in `json`, quotes included (to the end of `json` if it ends inside). */
function stringLength(json: string, start: number): number {
  for (let i = start + 1; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c === 0x5c) i++;
    else if (c === 0x22) return i + 1 - start;
  }
  return Number.POSITIVE_INFINITY; // already cut inside: it was long
}

export function renderForModel(json: string, budgetBytes: number, toolCallId: string): ModelContent {
  const fullBytes = Buffer.byteLength(json, 'utf8');
  if (fullBytes <= budgetBytes) return { content: json, truncated: false, fullBytes };
  const noteBytes = Buffer.byteLength(truncationNote(fullBytes, fullBytes, toolCallId), 'utf8');
  const shown = jsonPrefix(json, Math.max(0, budgetBytes - noteBytes));
  const shownBytes = Buffer.byteLength(shown, 'utf8');
  return { content: shown + truncationNote(fullBytes, shownBytes, toolCallId), truncated: true, fullBytes };
}
