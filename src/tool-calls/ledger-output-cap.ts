import { jsonPrefix } from '../executor/result-budget.js';

/**
 * The ledger's copy of a vendor result (tool_calls.output_redacted) is for ops to find and read a call by, in
 * listings, the detail view and exports; the agent's answer is the encrypted tool_call_results copy, always whole.
 * Redaction bounds its copy only roughly (REDACTION_LIMITS.maxOutputChars, 256 K UTF-16 units counted before JSON
 * escaping: a list from a Nango proxy call makes ~250 KB, escaped text up to ~1.6 MB), and 200 such rows are one
 * list body, 500 one export batch. So past LEDGER_OUTPUT_MAX_BYTES of JSON the row keeps a stub instead, and a
 * listing page of 200 is at most ~13 MB of outputs.
 */
export const LEDGER_OUTPUT_MAX_BYTES = 64 * 1024;

/**
 * UTF-8 bytes of the redacted JSON text a stub keeps. Re-escaped as a JSON string only its `"` and `\` grow (to two
 * characters; JSON.stringify already escaped every control character and lone surrogate to ASCII), so a stub is at
 * most about twice that and stays under the cap.
 */
export const LEDGER_OUTPUT_PREVIEW_BYTES = 16 * 1024;

/** What output_redacted holds for a result whose redacted JSON was over the cap. */
export interface TruncatedLedgerOutput {
  truncated: true;
  /** UTF-8 bytes of the whole redacted JSON text */
  bytes: number;
  /** its first LEDGER_OUTPUT_PREVIEW_BYTES at most, cut between values (jsonPrefix) */
  preview: string;
}

/**
 * The JSON text to store as output_redacted for an already redacted result: itself up to the cap, else a stub. The
 * preview is a prefix of the redacted text, so it holds nothing redaction removed (a cut "[REDAC" shows no more
 * than "[REDACTED]" did); it is cut between values as the model's copy is (jsonPrefix): an ops reader never sees
 * `"amount":12` for `"amount":123456`, nor half a surrogate pair (jsonb refuses those).
 */
export function ledgerOutputJson(redacted: unknown): string {
  const text = JSON.stringify(redacted) ?? 'null';
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= LEDGER_OUTPUT_MAX_BYTES) return text;
  const stub: TruncatedLedgerOutput = { truncated: true, bytes, preview: jsonPrefix(text, LEDGER_OUTPUT_PREVIEW_BYTES) };
  return JSON.stringify(stub);
}
