import { foldedName, keyWords, normalizeKey } from './redaction-keys.js';

/**
 * Whole-word secret names: short words that would hit unrelated keys as substrings ("pin" in "shipping"),
 * and the signatures of presigned / shared-access URLs: X-Amz-Signature (S3 SigV4), X-Goog-Signature (GCS V4)
 * and sig (Azure SAS) — anyone holding one can fetch the object until it expires. "signature" alone is not
 * one: signatureRequired, signature_confirmation are delivery options. (As a URL parameter it is: secret-params.ts.)
 * The other SigV4 secrets are already caught by their parts: X-Amz-Credential, X-Amz-Security-Token.
 */
const SECRET_EXACT = new Set([
  'auth',
  'creditcard',
  'pin',
  'pwd',
  'cardpin',
  'ssn',
  'cvv',
  'cvc',
  'cvv2',
  'cvc2',
  'csc',
  'securitycode',
  'otp',
  'xamzsignature',
  'xgoogsignature',
  'sig',
  // session identifiers: whoever holds one is logged in (session, connect.sid; sessionId, JSESSIONID and PHPSESSID by their parts)
  'session',
  'sid',
  'connectsid',
  'pass',
  'pw',
  // tax ids (US EIN, TIN, ITIN; Canadian SIN) and the SSN, below
  'ein',
  'tin',
  'itin',
  'sin',
]);
/** Substrings that mark a secret wherever they appear in a name (accessToken, x-shopify-access-token, dbPassword). */
const SECRET_PARTS = [
  'password',
  'passwd',
  'passphrase',
  'passcode',
  'secret',
  // also a part of its own, for labels: a label must END with a secret part (isSecretLabel), and "Secret Key" ends with "key"
  'secretkey',
  'token',
  'apikey',
  'accesskey',
  'privatekey',
  'authorization',
  'cookie',
  'cardnumber',
  'credential',
  'sessionid',
  'sessid',
  'encryptionkey',
  'signingkey',
  'masterkey',
  'hmackey',
  // the key of an account or an app under another name: Azure Storage AccountKey=, Cloudflare X-Auth-Key,
  // Datadog DD-APPLICATION-KEY / application_key, Azure API Management Ocp-Apim-Subscription-Key
  'accountkey',
  'authkey',
  'applicationkey',
  'appkey',
  'subscriptionkey',
  // SSN / tax ids, whatever the spelling: social_security_number, taxId, tax_identification_number, taxpayerId, national_id,
  // TaxNumber (Xero), VATNumber, national_insurance_number (UK), social_insurance_number (Canada)
  'socialsecurity',
  'taxid',
  'taxpayer',
  'taxnumber',
  'vatnumber',
  'nationalid',
  'nationalinsurance',
  'socialinsurance',
];
/**
 * The parts as one pattern (they are plain lower-case words): every key of every value and every
 * "word:" in text is asked, and one regex test costs a fraction of a dozen includes.
 */
const SECRET_PART = new RegExp(SECRET_PARTS.join('|'));

/**
 * Short secret words that are secret as any one word of a longer name too, not only as the whole of it:
 * DB_PASS, MYSQL_PWD, smtpPwd, user_pw, card[cvc], cardCvv, cvv_code, otpCode, vendor_tin, customer_ssn_last4.
 * Whole words only (see keyWords), so shipping, bypass, passenger, compass, pinned, spinner and einstein stay.
 * Not here, whole-key only: auth (auth_type, oauth_provider), session and sid (sessionCount; Twilio's AccountSid
 * and MessageSid are ids), sig.
 */
const SECRET_WORDS = new Set(['pass', 'pwd', 'pw', 'pin', 'otp', 'cvv', 'cvc', 'csc', 'ssn', 'ein', 'tin', 'itin', 'sin', 'cpf', 'nino']);
/**
 * A tax number written as two words, the second saying "number": tax_no, TaxNr, vat_id, VAT-No. Here "id" is the
 * number itself, not a word about it (TaxNumber and VATNumber are parts above, whole).
 */
const TAX_WORDS = new Set(['tax', 'vat']);
/** Words for "number" after an account or a tax word: account_no, acct_num, routing_nr, TaxNr. */
export const NUMBER_WORDS = new Set(['no', 'nr', 'num', 'number']);
/**
 * A word after the secret word that makes the value a fact about the secret rather than the secret: the verdict of a
 * check (Stripe cvc_check "pass", Shopify cvv_result_code "M"), its settings, an id (Pinterest pin_id). Only these
 * spare a name: a word not listed leaves it secret, so an unforeseen name is over-redacted rather than leaked.
 */
export const ABOUT_SECRET_WORDS = new Set([
  'check', 'checks', 'result', 'response', 'status', 'match', 'enabled', 'required', 'length', 'attempts', 'retries', 'id', 'ids',
]);
/**
 * India's postal code is the "PIN code": pin then code, in a name that says it is part of an address (shipping_pin_code,
 * billingPinCode), is a postcode. Anything else with the word pin is a PIN, pin_code and pinCode too: a postcode
 * over-redacted costs little, a card or device PIN leaked costs a lot. ("pincode", one word, is not the word pin.)
 */
const ADDRESS_WORDS = new Set(['address', 'shipping', 'billing', 'delivery', 'postal', 'pickup', 'ship', 'destination']);
/** Cheap first test: only a name that contains one of the short words somewhere is split into words. */
const SECRET_WORD_HINT = /p(?:ass|in|wd?)|otp|cv[vc]|csc|ssn|ein|tin|sin|cpf|nino|taxn|vat(?:id|n)/;

/** Every secret name has at least this many letters (pin, ssn, otp): a scanner of text turns shorter words ("14" of "14:05") away unasked. */
export const SECRET_NAME_MIN_LETTERS = Math.min(
  ...[...SECRET_EXACT, ...SECRET_WORDS, ...SECRET_PARTS, 'ssn'].map((word) => word.replace(/[^a-z]/g, '').length),
);

/**
 * When a secret lapses or was issued, rather than the secret: a secret's name followed by a word of time (Shopify's
 * authorization_expires_at and authorizationExpiresAt, the capture deadline of an uncaptured payment; token_expires_at;
 * credential_created_at) holds a time when its value is one, a timestamp in ISO 8601 or a number (epoch seconds or
 * milliseconds, a lifetime), and is kept; any other value under such a name still goes. Shopify's
 * extended_authorization_attributes holds only such times: it is walked, each member judged by its own name.
 */
export function isTimeAboutSecret(key: string, norm: string, value: unknown): boolean {
  if (norm === 'extendedauthorizationattributes') return typeof value === 'object' && value !== null && !Array.isArray(value);
  if (typeof value !== 'string' && typeof value !== 'number') return false;
  const words = keyWords(key);
  if (words.length < 2 || !TIME_WORDS.has(words[words.length - 1]!)) return false;
  return typeof value === 'number' ? Number.isFinite(value) : ISO_TIME.test(value);
}
const TIME_WORDS = new Set(['at', 'expires', 'expiry', 'expiration', 'until']);
const ISO_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?$/;

/** Whether a normalised name (normalizeKey) is secret as a whole. isSecretName also looks at its words. */
export function isSecretKey(norm: string): boolean {
  if (SECRET_EXACT.has(norm)) return true;
  // "ssn" only at an edge: "customerSsn", "ssnLast4", but not "className".
  if (norm.startsWith('ssn') || norm.endsWith('ssn')) return true;
  return SECRET_PART.test(norm);
}

/** Whether a name as written (a property, parameter or header name) names a secret: as a whole, or by one of its words. */
export function isSecretName(key: string, norm: string = normalizeKey(key)): boolean {
  if (!isSecretKey(norm) && !(SECRET_WORD_HINT.test(norm) && hasSecretWord(keyWords(key)))) return false;
  return !(norm.includes('token') && isTokenCountOrCursor(key, norm));
}

/**
 * Page cursors: a list's position, which ops need to tell which page was read. Judged not secret: a cursor is no
 * credential, it is only honoured alongside the caller's own credential, for the same query, and it grants nothing
 * alone. It is opaque and may encode state (the last sort value: in output, perhaps a name or an email), but so may
 * cursor, endCursor and page_info, which were never redacted; these names are the same thing spelled with "token".
 * Exact names only (Google pageToken / nextPageToken, AWS NextToken / ContinuationToken / NextContinuationToken,
 * YouTube prevPageToken): syncToken, deltaToken and the like are left secret, unexamined.
 */
const PAGE_CURSOR_NAMES = new Set([
  'pagetoken', 'nextpagetoken', 'prevpagetoken', 'previouspagetoken', 'nexttoken', 'continuationtoken', 'nextcontinuationtoken',
]);
/**
 * What is counted in a "…_tokens" counter of a language model's usage or limits: prompt_tokens, completion_tokens,
 * total_tokens, max_tokens, max_output_tokens, input_tokens, cache_read_input_tokens, reasoning_tokens, cached_tokens,
 * accepted_prediction_tokens. Only these words spare a plural name: access_tokens, device_tokens and a name not foreseen
 * hold tokens themselves, and stay secret. (The value is not asked: the names are judged alone, here and in text.)
 */
const COUNTED_WORDS = new Set([
  'prompt', 'completion', 'total', 'max', 'min', 'input', 'output', 'cached', 'reasoning', 'audio', 'text', 'image',
  'prediction', 'num', 'used', 'remaining', 'estimated', 'billed', 'thoughts', 'candidates', 'context',
]);

/**
 * A counter of tokens (max_tokens, promptTokenCount, prompt_tokens_details) or a page cursor rather than a token; a name
 * that is secret for another reason too (secret_tokens_count) stays secret.
 */
function isTokenCountOrCursor(key: string, norm: string): boolean {
  if (PAGE_CURSOR_NAMES.has(norm)) return true;
  const words = keyWords(key);
  const last = words.length - (words.at(-1) === 'details' ? 2 : 1);
  const counted = words[last] === 'tokens' && COUNTED_WORDS.has(words[last - 1] ?? '');
  // Gemini's promptTokenCount, totalTokenCount; token_count: a count is never a secret.
  const count = words.at(-1) === 'count' && (words.at(-2) === 'token' || words.at(-2) === 'tokens');
  if (!counted && !count) return false;
  const rest = words.filter((word) => word !== 'token' && word !== 'tokens').join('_');
  return !isSecretName(rest);
}

/** One pass each way, however many words: a name can be as long as a vendor makes it. */
function hasSecretWord(words: readonly string[]): boolean {
  const lastAbout = words.findLastIndex((word) => ABOUT_SECRET_WORDS.has(word));
  const firstAddress = words.findIndex((word) => ADDRESS_WORDS.has(word));
  // From the word before the last word about a secret: the "id" of vat_id is the number, not a word about it.
  for (let i = Math.max(0, lastAbout - 1); i < words.length; i++) {
    const word = words[i]!;
    const next = words[i + 1] ?? '';
    if (TAX_WORDS.has(word) && (NUMBER_WORDS.has(next) || next === 'id')) return true;
    if (i <= lastAbout || !SECRET_WORDS.has(word)) continue;
    if (word === 'pin' && words[i + 1] === 'code' && firstAddress >= 0 && firstAddress < i) continue;
    return true;
  }
  return false;
}

/** What a header or parameter name looks like: no blanks, so "Token Pack" (a product option) is not one as such. */
const FIELD_NAME = /^[\w.:[\]-]{1,128}$/;
/** A secret name that ends a label written for people (see isSecretLabel); not "cookie": Fortune Cookie is a product. */
const SECRET_LABEL_END = new RegExp(`(?:${SECRET_PARTS.filter((part) => part !== 'cookie').join('|')})$`);

/** The longest label judged: a label is a few words; a path may be longer (isSecretPathName). */
const LABEL_MAX = 128;

/**
 * A header or parameter name that names a secret: given as data ({name: "X-Api-Key", value},
 * ["Authorization", value]) or written in text before a colon ("X-Api-Key: …", {"api_key": …} inside a string).
 * Given as data it may also be a path (an SSM or Vault parameter) or a label with blanks; in text a name holds neither.
 * A label may hold a "/" too ("Database / Password", "Stripe/API Key", "prod/db/DB Password"): when the name is no
 * secret path, it is still asked as a label, whole and by its last segment.
 */
export function isSecretFieldName(name: string): boolean {
  // Judged by its shape as folded (foldedName), as a property name is: a full-width, look-alike or zero-width-split
  // spelling of a secret's name (a pasted label, a vendor's metafield) named a secret as a property but not as a pair's name.
  if (FIELD_NAME.test(name) || FIELD_NAME.test(foldedName(name))) return isSecretName(name);
  // Not a URL: https://x/oauth/token names an endpoint, by path or by label.
  if (name.includes('://')) return false;
  if (name.includes('/') && isSecretPathName(name)) return true;
  if (!/\s/.test(name)) return false;
  const last = name.slice(name.lastIndexOf('/') + 1).trim();
  return isSecretLabelWithRemark(name) || (last !== name && isSecretLabelWithRemark(last));
}

/**
 * A label as written, or without a remark in parentheses at its end: "Password (min 8 characters)", "API Key
 * (production)". Both are asked, so a secret named in the remark ("Key (secret)") is not dropped with it.
 */
function isSecretLabelWithRemark(label: string): boolean {
  if (label.length > LABEL_MAX) return false;
  if (isSecretLabel(label)) return true;
  const bare = label.trimEnd().replace(TRAILING_REMARK, '');
  return bare !== '' && bare.length < label.length && isSecretLabel(bare);
}

/** "(…)" at the end of a label, nothing nested; within LABEL_MAX characters the backtracking stays small. */
const TRAILING_REMARK = /\s*\([^()]*\)$/;

/**
 * /prod/db/password, prod/stripe/api_key: the last segment names what the parameter holds; the folders before it are
 * an environment or an application. Not a URL: https://x/oauth/token names an endpoint.
 */
function isSecretPathName(name: string): boolean {
  if (name.length > 2048 || name.includes('://')) return false;
  const trimmed = name.endsWith('/') ? name.slice(0, -1) : name;
  const last = trimmed.slice(trimmed.lastIndexOf('/') + 1);
  return FIELD_NAME.test(last) && isSecretName(last);
}

/**
 * A label with blanks ({label: "API Key", value}, {title: "Client Secret", value}): secret when it ends with a secret
 * name, as "API Key", "Access Token" and "Your password" do. Only the long secret parts count, and only at the end, so the
 * product options and line-item properties that reach these pairs stay: Token Pack, Secret Santa, Season Pass, Enamel Pin.
 */
function isSecretLabel(label: string): boolean {
  const norm = normalizeKey(label);
  return SECRET_LABEL_END.test(norm) && isSecretName(label.trim().replace(/\s+/g, '_'), norm);
}
