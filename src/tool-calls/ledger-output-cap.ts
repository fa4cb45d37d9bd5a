import { jsonbNumberLength } from '../common/storable-text.js';
import { jsonPrefix } from '../executor/result-budget.js';

/**
 * The ledger's copy of a vendor result (tool_calls.output_redacted) is for ops to find and read a call by, in
 * listings, the detail view and exports; the agent's answer is the encrypted tool_call_results copy, always whole.
 * Redaction bounds its copy only roughly (REDACTION_LIMITS.maxOutputChars, 256 K UTF-16 units counted before JSON
 * escaping: a list from a Nango proxy call makes ~250 KB, escaped text up to ~1.6 MB), and 200 such rows are one
 * list body, 500 one export batch. So past LEDGER_OUTPUT_MAX_BYTES as stored (storedJsonBytes: what
 * octet_length(output_redacted::text), by which listing pages are sized, counts) the row keeps a stub instead, and
 * a listing page of 200 is at most ~13 MB of outputs.
 */
export const LEDGER_OUTPUT_MAX_BYTES = 64 * 1024;

/**
 * UTF-8 bytes of the redacted JSON text a stub keeps. Re-escaped as a JSON string only its `"` and `\` grow (to two
 * characters; JSON.stringify already escaped every control character and lone surrogate to ASCII), so a stub is at
 * most about twice that and stays under the cap.
 */
export const LEDGER_OUTPUT_PREVIEW_BYTES = 16 * 1024;

/** What output_redacted holds for a result whose redacted JSON was over the cap as stored (storedJsonBytes). */
export interface TruncatedLedgerOutput {
  truncated: true;
  /** UTF-8 bytes of the whole redacted JSON text (as JSON.stringify writes it: jsonb would store more) */
  bytes: number;
  /** its first LEDGER_OUTPUT_PREVIEW_BYTES at most, cut between values (jsonPrefix) */
  preview: string;
}

/**
 * The JSON text to store as output_redacted for an already redacted result: itself up to the cap as stored, else a stub. The
 * preview is a prefix of the redacted text, so it holds nothing redaction removed (a cut "[REDAC" shows no more
 * than "[REDACTED]" did); it is cut between values as the model's copy is (jsonPrefix): an ops reader never sees
 * `"amount":12` for `"amount":123456`, nor half a surrogate pair (jsonb refuses those).
 */
export function ledgerOutputJson(redacted: unknown): string {
  const text = JSON.stringify(redacted) ?? 'null';
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= LEDGER_OUTPUT_MAX_BYTES && storedWithinCap(text, bytes)) return text;
  const stub: TruncatedLedgerOutput = { truncated: true, bytes, preview: jsonPrefix(text, LEDGER_OUTPUT_PREVIEW_BYTES) };
  return JSON.stringify(stub);
}

/** A number written with an exponent (JSON.stringify writes them "1e+308", "5e-324"), or text that reads so in a string. */
const EXPONENT = /\de[+-]/;

/**
 * Whether the JSON text is within the cap as stored (storedJsonBytes). Without an exponent the blanks at most double
 * the text, so text of half the cap (most results) is not scanned.
 */
function storedWithinCap(text: string, bytes: number): boolean {
  if (2 * bytes <= LEDGER_OUTPUT_MAX_BYTES && !EXPONENT.test(text)) return true;
  return storedJsonBytes(text, bytes) <= LEDGER_OUTPUT_MAX_BYTES;
}

/**
 * UTF-8 bytes of JSON text `text` (of `bytes` bytes, as JSON.stringify wrote it) as jsonb keeps and prints it, which
 * is what octet_length(output_redacted::text) counts: a blank after every "," and ":" between values, and a number as
 * an exact decimal with every digit (1e308, 6 bytes of JSON, is 309: 800 of them made 5.6 KB of JSON and 249 KB
 * stored). Strings print as JSON.stringify escapes them. Members jsonb drops (a repeated name) are counted: never less.
 */
export function storedJsonBytes(text: string, bytes: number): number {
  let stored = bytes;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // A string: to its closing quote, over escapes.
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x2c || c === 0x3a) stored++; // , :
    else if (c === 0x65 && i > 0 && isDigit(text.charCodeAt(i - 1))) {
      // The "e" of a number (not of true or false: a digit comes before it): the whole number, printed out.
      let start = i - 1;
      while (start > 0 && isNumberChar(text.charCodeAt(start - 1))) start--;
      let end = i + 1;
      while (end < text.length && isNumberChar(text.charCodeAt(end))) end++;
      stored += jsonbNumberLength(Number(text.slice(start, end))) - (end - start);
      i = end - 1;
    }
  }
  return stored;
}

const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;
/** A character of a JSON number but its "e": digits, "-", "+", ".". */
const isNumberChar = (c: number): boolean => isDigit(c) || c === 0x2d || c === 0x2b || c === 0x2e;
