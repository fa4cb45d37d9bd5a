/**
 * Secrets and personal data recognised by their shape inside free text.
 * Every pattern is anchored on a boundary so it starts at most once per token:
 * the text can be 10,000 characters of vendor output and must not cost quadratic time.
 */
import { BASIC, HAS_BASIC, redactAuthorizationValues, redactBasic, redactUrlUser, URL_PASSWORD, URL_USER_CREDENTIAL } from './credentials-in-text.js';
import { REDACTED } from './markers.js';
import { redactCardNumbers } from './payment-numbers.js';
import { redactSecretFields } from './secret-fields.js';
import { ENCODED_EQUALS, ENCODED_SECRET_PARAM, redactEncodedParam, redactParam, redactXmlElement, SECRET_PARAM, XML_ELEMENT } from './secret-params.js';
import { FoldedText, foldForms } from './unicode-forms.js';
import { BEARER, JWT, PRIVATE_KEY_BLOCK, SLACK_WEBHOOK, TELEGRAM_BOT_TOKEN, VENDOR_TOKEN_HEAD, VENDOR_TOKENS } from './token-shapes.js';

/** US SSN 123-45-6789 and EIN 12-3456789, not when part of a longer dash-joined number (Amazon 112-0000001-1234567). */
const TAX_ID = /(?<!\d)(?<!\d-)(?:\d{3}-\d{2}-\d{4}|\d{2}-\d{7})(?!\d)(?!-\d)/g;
/** The SSN written with spaces (123 45 6789), not inside a longer run of space-separated digit groups. */
const TAX_ID_SPACED = /(?<!\d)(?<!\d )\d{3} \d{2} \d{4}(?!\d)(?! \d)/g;

/** Secrets: what input redaction looks for in every string (and output redaction too). */
export function redactSecretsInText(text: string, options: { cards: boolean }): string {
  let out = text;
  if (out.includes('PRIVATE KEY')) out = out.replace(PRIVATE_KEY_BLOCK, REDACTED);
  if (out.length > 14) out = redactAuthorizationValues(out);
  out = out.replace(BEARER, `$1 ${REDACTED}`);
  if (HAS_BASIC.test(out)) out = out.replace(BASIC, redactBasic);
  if (out.includes('eyJ')) out = out.replace(JWT, REDACTED);
  if (VENDOR_TOKEN_HEAD.test(out)) for (const pattern of VENDOR_TOKENS) out = out.replace(pattern, REDACTED);
  if (out.includes(':A')) out = out.replace(TELEGRAM_BOT_TOKEN, `:${REDACTED}`);
  if (out.includes('hooks.slack.com')) out = out.replace(SLACK_WEBHOOK, `$1${REDACTED}`);
  if (out.includes('@') && out.includes('//')) out = out.replace(URL_USER_CREDENTIAL, redactUrlUser).replace(URL_PASSWORD, `$1${REDACTED}@`);
  if (out.length > 4 && (out.includes(':') || out.includes('=>'))) out = redactSecretFields(out);
  if (out.includes('=')) out = out.replace(SECRET_PARAM, redactParam);
  if (out.includes('%') && ENCODED_EQUALS.test(out)) out = out.replace(ENCODED_SECRET_PARAM, redactEncodedParam);
  if (out.includes('</')) out = out.replace(XML_ELEMENT, redactXmlElement);
  if (options.cards) out = redactCardNumbers(out);
  // Text with non-ASCII characters may write a tax id with other dashes, blanks or digits: read in a folded copy.
  const scanned = foldForms(out);
  if (scanned === out) return out.replace(TAX_ID, REDACTED).replace(TAX_ID_SPACED, REDACTED);
  return new FoldedText(out, scanned).replace(TAX_ID, REDACTED).replace(TAX_ID_SPACED, REDACTED).text;
}
