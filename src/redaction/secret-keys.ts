import { keyWords, normalizeKey } from './redaction-keys.js';

/**
 * Whole-word secret names: short words that would hit unrelated keys as substrings ("pin" in "shipping"),
 * and the signatures of presigned / shared-access URLs: X-Amz-Signature (S3 SigV4), X-Goog-Signature (GCS V4)
 * and sig (Azure SAS) — anyone holding one can fetch the object until it expires. "signature" alone is not
 * one: signatureRequired, signature_confirmation are delivery options.
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

/** Whether a normalised name (normalizeKey) is secret as a whole. isSecretName also looks at its words. */
export function isSecretKey(norm: string): boolean {
  if (SECRET_EXACT.has(norm)) return true;
  // "ssn" only at an edge: "customerSsn", "ssnLast4", but not "className".
  if (norm.startsWith('ssn') || norm.endsWith('ssn')) return true;
  return SECRET_PART.test(norm);
}

/** Whether a name as written (a property, parameter or header name) names a secret: as a whole, or by one of its words. */
export function isSecretName(key: string, norm: string = normalizeKey(key)): boolean {
  return isSecretKey(norm) || (SECRET_WORD_HINT.test(norm) && hasSecretWord(keyWords(key)));
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

/** What a header or parameter name looks like: no blanks, so "Token Pack" (a product option) is not one. */
const FIELD_NAME = /^[\w.:[\]-]{1,128}$/;

/**
 * A header or parameter name that names a secret: given as data ({name: "X-Api-Key", value},
 * ["Authorization", value]) or written in text before a colon ("X-Api-Key: …", {"api_key": …} inside a string).
 */
export function isSecretFieldName(name: string): boolean {
  return FIELD_NAME.test(name) && isSecretName(name);
}
