/**
 * Secrets and personal data recognised by their shape inside free text.
 * Every pattern is anchored on a boundary so it starts at most once per token:
 * the text can be 10,000 characters of vendor output and must not cost quadratic time.
 */
import { BASIC, HAS_BASIC, redactAuthorizationValues, redactBasic, redactUrlUser, URL_PASSWORD, URL_USER_CREDENTIAL } from './credentials-in-text.js';
import { redactConfiguredSecrets } from './configured-secrets.js';
import { REDACTED } from './markers.js';
import { redactCardNumbers } from './payment-numbers.js';
import { percentDecode } from './percent-decode.js';
import { redactSecretFields } from './secret-fields.js';
import { ENCODED_EQUALS, ENCODED_SECRET_PARAM, redactEncodedParam, redactSecretParams, redactXmlElement, XML_ELEMENT } from './secret-params.js';
import { redactSeparatedFields } from './separated-fields.js';
import { FoldedText, foldForms } from './unicode-forms.js';
import { BEARER, JWT, PRIVATE_KEY_BLOCK, SLACK_WEBHOOK, TELEGRAM_BOT_TOKEN, VENDOR_TOKEN_HEAD, VENDOR_TOKENS } from './token-shapes.js';

/**
 * US SSN 123-45-6789 and EIN 12-3456789, not when part of a longer dash-joined number (Amazon 112-0000001-1234567)
 * nor glued to the letters after it: an EIN's shape ends the fourth group of one UUID in about 500 (…-9c27-5750688bc97a)
 * and starts a W3C trace context (00-6519826cd8…), ids shown as written.
 */
const TAX_ID = /(?<!\d)(?<!\d-)(?:\d{3}-\d{2}-\d{4}|\d{2}-\d{7})(?![A-Za-z0-9])(?!-\d)/g;
/**
 * A tax id's shape after a word and a dash is a reference's number (a SKU TSH-713-31-9108, an invoice INV-24-1234567),
 * unless the word names a tax id (SSN-123-45-6789, EIN-12-3456789).
 */
function redactTaxId(match: string, offset: number, text: string): string {
  if (offset < 2 || text[offset - 1] !== '-' || !/[A-Za-z]/.test(text[offset - 2]!)) return REDACTED;
  return TAX_WORD_BEFORE.test(text.slice(Math.max(0, offset - 8), offset - 1)) ? REDACTED : match;
}
const TAX_WORD_BEFORE = /(?:^|[^A-Za-z])(?:ssn|ein|fein|tin|itin|atin|ptin|sin|tax|taxid)$/i;

/**
 * "Bearer" before one plain word of prose ("Ring Bearer Suspenders", "Torch Bearer Collection", "the bearer instrument"):
 * 8 to 16 letters, lower case or capitalised, is no token. A token has digits, mixed case or more length; one of only
 * lower-case letters and 16 long is one in about 10^6 of random 16-character tokens. An Authorization value is hidden
 * whole before this (redactAuthorizationValues), whatever it holds.
 */
function redactBearer(match: string, scheme: string): string {
  return PROSE_AFTER_BEARER.test(match) ? match : `${scheme} ${REDACTED}`;
}
const PROSE_AFTER_BEARER = /\s[A-Z]?[a-z]{7,15}$/;
const BEARER_HINT = /bearer/i;

/** The SSN written with spaces (123 45 6789), not inside a longer run of space-separated digit groups. */
const TAX_ID_SPACED = /(?<!\d)(?<!\d )\d{3} \d{2} \d{4}(?!\d)(?! \d)/g;

/** "Bearer+<token>": a form-encoded (application/x-www-form-urlencoded) value writes the blank as "+". */
const BEARER_PLUS = /\b(Bearer)\+[^\s"'\\,;<>&=+]{8,}=*/gi;
const HAS_BEARER_PLUS = /\bBearer\+/i;

/**
 * Secrets: what input redaction looks for in every string (and output redaction too). Text with a percent escape is
 * also read decoded (redactPercentEncoded), so a credential written encoded (Authorization%3A%20Bearer%20…, a URL with
 * a password inside a redirect_uri, JSON in an OAuth state) goes as its plain form does.
 */
export function redactSecretsInText(text: string, options: { cards: boolean }): string {
  const out = redactAsWritten(text, options);
  return out.includes('%') ? redactPercentEncoded(out, options) : out;
}

function redactAsWritten(text: string, options: { cards: boolean }): string {
  let out = redactConfiguredSecrets(text);
  if (out.includes('PRIVATE KEY')) out = out.replace(PRIVATE_KEY_BLOCK, REDACTED);
  if (out.length > 14) out = redactAuthorizationValues(out);
  if (BEARER_HINT.test(out)) out = out.replace(BEARER, redactBearer);
  if (out.includes('+') && HAS_BEARER_PLUS.test(out)) out = out.replace(BEARER_PLUS, `$1+${REDACTED}`);
  // A JWT first: "Basic eyJ….eyJ….sig" would otherwise lose only its header segment, which decodes to printable text
  // with a ":" as a user:password does, and keep the payload and signature, and the JWT pattern its head.
  if (out.includes('eyJ')) out = out.replace(JWT, REDACTED);
  if (HAS_BASIC.test(out)) out = out.replace(BASIC, redactBasic);
  if (VENDOR_TOKEN_HEAD.test(out)) for (const pattern of VENDOR_TOKENS) out = out.replace(pattern, REDACTED);
  if (out.includes(':A')) out = out.replace(TELEGRAM_BOT_TOKEN, `:${REDACTED}`);
  if (out.includes('hooks.slack.com')) out = out.replace(SLACK_WEBHOOK, `$1${REDACTED}`);
  if (out.includes('@') && out.includes('//')) out = out.replace(URL_USER_CREDENTIAL, redactUrlUser).replace(URL_PASSWORD, `$1${REDACTED}@`);
  if (out.length > 4 && (out.includes(':') || out.includes('=>'))) out = redactSecretFields(out);
  if (out.includes('\t') || out.includes('|') || out.includes('--')) out = redactSeparatedFields(out);
  if (out.includes('=')) out = redactSecretParams(out);
  if (out.includes('%') && ENCODED_EQUALS.test(out)) out = out.replace(ENCODED_SECRET_PARAM, redactEncodedParam);
  if (out.includes('</')) out = out.replace(XML_ELEMENT, redactXmlElement);
  if (options.cards) out = redactCardNumbers(out);
  // Text with non-ASCII characters may write a tax id with other dashes, blanks or digits: read in a folded copy.
  const scanned = foldForms(out);
  if (scanned === out) return out.replace(TAX_ID, redactTaxId).replace(TAX_ID_SPACED, REDACTED);
  return new FoldedText(out, scanned).replace(TAX_ID, redactTaxId).replace(TAX_ID_SPACED, REDACTED).text;
}

/** A percent escape; where a run of URL text ends (no URL holds these unencoded); where a run's parameters part. */
const PERCENT_ESCAPE = /%[0-9A-Fa-f]{2}/g;
const RUN_END = /[\s"'<>\\`]/g;
const RUN_END_CHAR = /[\s"'<>\\`]/;
const HAS_PERCENT_ESCAPE = /%[0-9A-Fa-f]{2}/;
const PART_END = /[&?#;=]/g;

/**
 * The text read percent-decoded, "+" read as a blank: each run of URL text (up to a blank, a quote, "<", ">", "\\")
 * that holds an escape is split into its parts at a raw "&", "?", "#", ";" or "=" (a parameter's name or value, a
 * URL before its query), and each part with an escape is decoded and redacted as written text is. A part in which
 * that finds a secret the text as written does not show is hidden whole: its encoded form cannot be redacted piece by
 * piece (as redactAroundHidden hides text whose format characters split a secret). Text without an escape costs one
 * search; each part is decoded and read once more.
 */
function redactPercentEncoded(text: string, options: { cards: boolean }): string {
  let out = '';
  // Text before `kept` is in `out`; runs already read end before `floor`.
  let kept = 0;
  let floor = 0;
  PERCENT_ESCAPE.lastIndex = 0;
  for (let m = PERCENT_ESCAPE.exec(text); m !== null; m = PERCENT_ESCAPE.exec(text)) {
    let runStart = m.index;
    while (runStart > floor && !RUN_END_CHAR.test(text[runStart - 1]!)) runStart--;
    RUN_END.lastIndex = m.index;
    const runEnd = RUN_END.exec(text)?.index ?? text.length;
    const run = text.slice(runStart, runEnd);
    for (let partStart = 0; partStart < run.length; ) {
      PART_END.lastIndex = partStart;
      const partEnd = PART_END.exec(run)?.index ?? run.length;
      if (holdsEncodedSecret(run.slice(partStart, partEnd), options)) {
        out += text.slice(kept, runStart + partStart) + REDACTED;
        kept = runStart + partEnd;
      }
      partStart = partEnd + 1;
    }
    floor = runEnd;
    PERCENT_ESCAPE.lastIndex = runEnd;
  }
  return kept === 0 ? text : out + text.slice(kept);
}

/** Whether a part, percent-decoded ("+" a blank), holds a secret the text as written does not show. */
function holdsEncodedSecret(part: string, options: { cards: boolean }): boolean {
  if (!HAS_PERCENT_ESCAPE.test(part)) return false;
  const decoded = percentDecode(part.includes('+') ? part.replaceAll('+', ' ') : part);
  return decoded !== part && redactAsWritten(decoded, options) !== decoded;
}
