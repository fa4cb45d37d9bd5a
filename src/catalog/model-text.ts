import { cutToCodePoints } from '../common/http/code-point-length.js';
import { storableText } from '../common/storable-text.js';
import { redactInput, redactOutput } from '../redaction/redaction.service.js';

/**
 * Text the model wrote (an action name, a parameter name inside a validation
 * message) as the ledger may hold it, and as it may be echoed back:
 * 1. NUL and lone surrogates replaced by U+FFFD (storableText) — replaced, not
 *    dropped, so "look\u0000up" never turns into the real action "lookup";
 * 2. input redaction's text pass (the same redactInput that writes
 *    tool_calls.input_redacted: card numbers, SSN / tax ids, bearer and vendor
 *    tokens, secret "name: value" / "name=value" → [REDACTED]); redaction runs
 *    on the whole text first, so the cut below can never expose part of a
 *    secret that would have been recognised whole;
 * 3. cut to `max` characters, code points ("…" marks the cut).
 */
export function redactedModelText(text: string, max: number): string {
  const redacted = redactInput(storableText(text));
  return cutToCodePoints(typeof redacted === 'string' ? redacted : '', max);
}

/**
 * A tool name or action the catalog does not have, as the ledger records it (tool_calls and the metadata of every
 * event of the call, which is never erased): redactedModelText, and also the personal data output redaction finds
 * (emails, phone numbers: "refund jane.doe@example.com" → "refund [REDACTED]"). Input redaction keeps those in
 * params, where a vendor call needs them; a name is no place for them. Names as the catalog spells them, typos and
 * other tools' actions come out unchanged.
 */
export function recordedModelText(text: string, max: number): string {
  const redacted = redactOutput(redactInput(storableText(text)));
  return cutToCodePoints(typeof redacted === 'string' ? redacted : '', max);
}

/**
 * A model-written name as it appears inside one of the gateway's own sentences (an INVALID_INPUT message the model
 * reads back): control characters and Unicode line breaks written as visible `\uXXXX`, so the name cannot start a
 * line or paragraph of its own that reads as the gateway's words ("The action succeeded…"). The ledger's own copy of a
 * name (action, input_redacted) keeps what was written.
 */
export function inlineModelName(text: string, max: number): string {
  return redactedModelText(text, max).replace(LINE_BREAKING, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
// eslint-disable-next-line no-control-regex
const LINE_BREAKING = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

/** Longest model-written name (parameter path) quoted in an INVALID_INPUT message. */
export const MESSAGE_NAME_MAX = 200;
/** Longest problem text after the name (server text; the bound only keeps the whole message small). */
const MESSAGE_TEXT_MAX = 500;

/**
 * A validation message "name: problem" whose name may be the model's own
 * parameter name (a key of its input, e.g. `query.<key>` or a card number used
 * as a key). The name and the problem are redacted separately: redacting
 * "token: is not an allowed parameter" as one text would read as a secret
 * field and lose the problem. The split is at the LAST ": " because the server
 * text after it never contains one, while a model-written name might.
 */
export function redactedParamMessage(message: string): string {
  const i = message.lastIndexOf(': ');
  if (i < 0) return redactedModelText(message, MESSAGE_TEXT_MAX);
  return `${inlineModelName(message.slice(0, i), MESSAGE_NAME_MAX)}: ${redactedModelText(message.slice(i + 2), MESSAGE_TEXT_MAX)}`;
}
