import { REDACTED } from './markers.js';

/** Lookahead kept past the cut so a secret straddling it is still recognised whole. */
export const CUT_LOOKAHEAD = 1024;

/**
 * The first `max` characters of a text, redacted by `redact`, never leaving part of a secret the cut split. Redaction
 * reads CUT_LOOKAHEAD characters past the cut, so that a secret straddling the cut is seen whole. A text that goes on
 * past that window can have a secret straddling the window's end, never seen whole either, and an earlier redaction
 * that shortened the text (a PEM block to [REDACTED]) brings it under the cut. So the window's redaction is kept only
 * as far as the head's alone agrees with it: the head's holds nothing from past the cut. Where they part because the
 * window's hid a secret the head's saw only in part, that [REDACTED] stays.
 *
 * Shared by the ledger's walker and the log lines of errors: each cuts long text, and neither may show what the other
 * hides.
 */
export function redactedHead(raw: string, max: number, redact: (text: string) => string): string {
  const window = redact(raw.slice(0, max + CUT_LOOKAHEAD));
  if (raw.length <= max + CUT_LOOKAHEAD) return window.slice(0, max);
  const agreed = commonPrefixLength(window, redact(raw.slice(0, max)));
  const kept = window.startsWith(REDACTED, agreed) ? agreed + REDACTED.length : agreed;
  return window.slice(0, Math.min(max, kept));
}

/** The length of the longest common prefix of two texts. */
function commonPrefixLength(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}
