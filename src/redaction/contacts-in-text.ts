import { REDACTED } from './markers.js';
import { IBAN, redactIban } from './payment-numbers.js';
import { percentDecode } from './percent-decode.js';
import { FoldedText, foldForms, type Scannable } from './unicode-forms.js';

/** Internationalised too: letters and digits of any script in the local part and the domain (jöhn@exämple.com). */
const EMAIL = /(?<![\p{L}\p{N}._%+-])[\p{L}\p{N}._%+-]+@[\p{L}\p{N}-]+(?:\.[\p{L}\p{N}-]+)+/gu;
/**
 * Only unmistakable phone shapes: "+" then a country code, or a parenthesised area code. A parenthesised trunk
 * or area code may be glued to the next group (+44 (0)20 7946 0958). Groups may be split by no-break spaces
 * (U+00A0, U+202F), as French typesetting does. After "+" and the country code, a group may hold up to 8 digits
 * (+44 7911 123456, +49 30 12345678, +91 98765 43210), or the whole subscriber number be one run (+1 4155552671);
 * redactPhone keeps the total to what a phone has.
 * Bare digit strings are left alone: they are far more often order ids, amounts or dates. Each phone shape may also
 * start right after the escape of a line break or tab (\n, \r, \t: JSON held as text), whose letter is no part of it.
 */
const PHONE =
  /(?:(?<![A-Za-z0-9+])|(?<=\\[nrt]))(?:\+[1-9]\d{0,2}(?:[ \u00a0\u202f.-]?\(\d{1,4}\)[ \u00a0\u202f.-]?\d{1,8}(?:[ \u00a0\u202f.-]\d{1,8}){1,4}|(?:[ \u00a0\u202f.-]\d{1,8}){2,5}|[ \u00a0\u202f.-]\d{6,14})|\+[1-9]\d{7,14}|\(\d{2,4}\)[ \u00a0\u202f.-]?\d{3,4}[ \u00a0\u202f.-]?\d{4})(?!\d)/g;
/**
 * The international prefix written 00 instead of "+" (0044 20 7946 0958): at least two more groups, joined by
 * spaces or dashes only, not dots (001.002.003.004 is a padded address, not a phone), and not a group inside a
 * longer run of digit groups (an account number, a card).
 */
const PHONE_00 = /(?:(?<![\w.+-])(?<!\d[ -])|(?<=\\[nrt]))00[1-9]\d{0,2}(?:[ -]?\(\d{1,4}\)[ -]?\d{1,4}(?:[ -]\d{1,4}){1,4}|(?:[ -]\d{1,4}){2,5})(?!\d)/g;
/**
 * A North American number written 415-555-2671 or 415.555.2671: three groups, one separator used twice, an area
 * code that cannot start with 0 or 1; perhaps after the country code written 1- (1-415-555-2671, not 1.415.555.2671,
 * a version). Not part of a longer dotted or dashed number (an Amazon 3-7-7 id, a version).
 */
const NANP_PHONE = /(?:(?<![\w.+-])|(?<=\\[nrt]))(?:1-(?=\d{3}-))?[2-9]\d{2}([-.])\d{3}\1\d{4}(?!\w|[-.]\d)/g;
/**
 * The same written with single spaces (415 555 2671, 1 415 555 2671), as order notes and support messages have it.
 * Spaces also part the groups of longer numbers (a card, an account, a list of quantities), so not after a digit and a
 * space nor before a space and a digit: three groups and no more, as the spaced SSN.
 */
const NANP_PHONE_SPACED = /(?:(?<![\w.+-])(?<!\d )|(?<=\\[nrt]))(?:1 (?=\d{3} ))?[2-9]\d{2} \d{3} \d{4}(?!\w|[-. ]\d)/g;

/**
 * A national number written with its trunk 0 (UK 07911 123456, 020 7946 0958; Germany 030 12345678, 030/12345678;
 * Japan 090-1234-5678; Netherlands 06-12345678): an area or mobile code of 0 then 1-4 digits (not 00: an international
 * prefix, or a zero-padded reference), then one or two groups, one separator used throughout. Not a part of a longer
 * run of digit groups, dots, dashes or word characters (an Amazon 3-7-7 id, a version, a timestamp, a tracking number,
 * a card), nor a fragment or an order name (#0201-123456): redactTrunkPhone keeps the total to 9-11 digits, which also
 * leaves times (0800-1700) and short postal codes (060-0001) alone, and a query value (?ref=0201-123456) unless its
 * name says phone (afterCodeLabel).
 */
const TRUNK_PHONE = /(?:(?<![\w.+/#-])(?<!\d[ /])|(?<=\\[nrt]))0[1-9]\d{0,3}([ /-])\d{3,8}(?:\1\d{3,8})?(?![\w/]|[-.: /]\d)/g;
/**
 * National mobiles in the other common shapes: the UK's written unspaced (07911123456, one token of 11 digits), and
 * France's in pairs (06 12 34 56 78, 06.12.34.56.78, 06-12-34-56-78). Bounded as TRUNK_PHONE is.
 */
const NATIONAL_MOBILE = /(?<![\w.+/#-])(?<!\d[ /.])(?:07\d{9}|0[1-9]([ .-])\d\d(?:\1\d\d){3})(?![\w/]|[-.: /]\d)/g;
/**
 * A label that says the code after it is no phone: SKU 0201-123456, ref 0201-123456, invoice 0123/456789, order
 * 07911123456, No. …, id: … (not "tel. no", "phone no"). Read on the few characters before a national-phone match only.
 */
const CODE_LABEL_BEFORE =
  /(?:^|[^\p{L}\p{N}_])(?:sku|ref|reference|invoice|inv|order|item|art|id|nr|batch|lot|code|tag|(?<!(?:tel|phone|fax|mobile|cell|contact)\.?\s?)no)\.?\s?[:#]?\s?#?$/iu;
const LABEL_WINDOW = 24;

/** A query parameter or form field whose name says phone: ?phone=07911-123456, tel=…, whatsapp_number=…. */
const PHONE_PARAM_BEFORE = /(?:phone|tel|mobile|cell|fax|msisdn|whatsapp|contact)[\w.-]*=$/i;

/**
 * Whether the national-phone match at offset follows a label that says it is a code (SKU, ref, invoice, …), or is the
 * value of a query parameter (?ref=0201-123456) whose name does not say phone.
 */
function afterCodeLabel(text: string, offset: number): boolean {
  if (offset === 0) return false;
  const before = text.slice(Math.max(0, offset - LABEL_WINDOW), offset);
  if (before.endsWith('=')) return !PHONE_PARAM_BEFORE.test(before);
  return CODE_LABEL_BEFORE.test(before);
}

/**
 * Contact details: what output redaction adds for vendor results, written out or percent-encoded in a URL.
 * `nationalPhones: false` leaves national numbers (TRUNK_PHONE, NATIONAL_MOBILE) alone: the walker says so for the
 * value of an identifier key (a SKU, a tracking number, an id) and for a value that is only digits and separators,
 * where 0201-123456 is a code, not a phone.
 */
export function redactContactsInText(text: string, options: { nationalPhones: boolean } = { nationalPhones: true }): string {
  const out = redactWrittenContacts(text, options.nationalPhones);
  // Cheap first test: text with neither "%" nor "+" holds no encoded run, and ordinary prose pays nothing more.
  if (!(out.includes('%') || out.includes('+'))) return out;
  return out.replace(ENCODED_RUN, options.nationalPhones ? redactEncodedRunWithNational : redactEncodedRunWithoutNational);
}

/** Made once, not per text: ENCODED_RUN's replacer with and without national numbers. */
const redactEncodedRunWithNational = (run: string): string => redactEncodedRun(run, true);
const redactEncodedRunWithoutNational = (run: string): string => redactEncodedRun(run, false);

function redactWrittenContacts(text: string, nationalPhones: boolean): string {
  // Text with non-ASCII characters may write a phone or an IBAN with other dashes, blanks or digits (+1 415–555–2671,
  // ＋１ ４１５ …): its contacts are looked for in a folded copy of the same length, and cut out of the text as written.
  const scanned = foldForms(text);
  return scanned === text ? redactWrittenContactsIn(text, nationalPhones) : redactWrittenContactsIn(new FoldedText(text, scanned), nationalPhones).text;
}

function redactWrittenContactsIn<T extends Scannable<T>>(text: T, nationalPhones: boolean): T {
  let out = text.includes('@') ? text.replace(EMAIL, REDACTED) : text;
  if (out.search(/[A-Z]{2}\d{2}/) >= 0) out = out.replace(IBAN, redactIban);
  out = out.replace(PHONE, redactPhone);
  // A "00" run that is not a phone (a country code too short a number) is kept as written, its "00" included.
  if (out.includes('00')) out = out.replace(PHONE_00, (match) => (isCountryCode(/^\d+/.exec(match.slice(2))![0]) && redactPhone(match.slice(2)) === REDACTED ? REDACTED : match));
  out = out.replace(NANP_PHONE, REDACTED);
  if (out.includes(' ')) out = out.replace(NANP_PHONE_SPACED, REDACTED);
  if (!nationalPhones || !out.includes('0')) return out;
  return out.replace(TRUNK_PHONE, redactTrunkPhone).replace(NATIONAL_MOBILE, redactNationalMobile);
}

/**
 * A run of URL text holding an escape (%XX) or a "+" (a space in a form-encoded query), cut at what separates URL parts
 * (& ? = # /), blanks and quotes: the value of one query parameter, or one path segment. Any escape, not only %40 and
 * %2B: a phone is as often written %28415%29%20555-2671 or (415)+555-2671. Starts only where a run starts, so it is
 * tried once per run.
 */
const ENCODED_RUN = /(?<![^\s&?=#/"'<>\\])[^\s&?=#/"'<>\\]*(?:%[0-9A-Fa-f]{2}|\+)[^\s&?=#/"'<>\\]*/g;

/**
 * The run redacted whole when a decoded copy holds a contact. Judged on copies that are never kept: the record shows
 * the run as the vendor wrote it, or [REDACTED]. "+" is read as a space (a form-encoded query), and also as a plus when
 * the run has escapes too (encodeURI leaves "+" alone: +44%207911%20123456). A value encoded twice
 * (jane.doe%2540example.com: a URL inside a URL) shows its %25 and is decoded once more; never more than twice, so the
 * cost stays a few passes over the run.
 */
function redactEncodedRun(run: string, nationalPhones: boolean): string {
  const once = formDecode(run);
  if (showsContact(once, nationalPhones)) return REDACTED;
  if (run.includes('+') && run.includes('%') && showsContact(percentDecode(run), nationalPhones)) return REDACTED;
  return /%25[0-9A-Fa-f]{2}/.test(run) && showsContact(formDecode(once), nationalPhones) ? REDACTED : run;
}

/** "+" is a space in a form-encoded query (decoded first: a "+" of %2B is a plus). */
function formDecode(text: string): string {
  return percentDecode(text.includes('+') ? text.replaceAll('+', ' ') : text);
}

/** Every contact has a digit (a phone) or an "@" (an email): text with neither, as most decoded runs, is not searched. */
function showsContact(decoded: string, nationalPhones: boolean): boolean {
  return /[\d@]/.test(decoded) && redactWrittenContacts(decoded, nationalPhones) !== decoded;
}

/** ITU-T E.164 country codes of two digits, and the first two digits of the three-digit ones (1 and 7 stand alone). */
const CC_TWO = new Set([20, 27, 30, 31, 32, 33, 34, 36, 39, 40, 41, 43, 44, 45, 46, 47, 48, 49, 51, 52, 53, 54, 55, 56, 57, 58, 60, 61, 62, 63, 64, 65, 66, 81, 82, 84, 86, 90, 91, 92, 93, 94, 95, 98]);
const CC_THREE_ZONES = new Set([21, 22, 23, 24, 25, 26, 29, 35, 37, 38, 42, 50, 59, 67, 68, 69, 80, 85, 87, 88, 96, 97, 99]);

/**
 * Whether the digits written after an international 00 are a country code: "0044 20 …" is a UK number, but
 * "0012-3456-7890" (no country 12) is a zero-padded reference.
 */
function isCountryCode(digits: string): boolean {
  const n = Number(digits);
  if (digits.length === 1) return n === 1 || n === 7;
  if (digits.length === 2) return CC_TWO.has(n);
  return CC_THREE_ZONES.has(Math.floor(n / 10));
}

/**
 * Group sizes that are something else: a US ZIP+4 that starts with 0 (New England, New Jersey, Puerto Rico:
 * 02134-1234), and the North American 3-3-4 with an area code no phone there has (015-555-2671: an id in that shape).
 */
const NOT_TRUNK_PHONE_SHAPES = new Set(['5,4', '3,3,4', '5,5']);

/**
 * A national number has 9-11 digits with its trunk 0 (UK and Germany 11, Australia 10, Belgium 9). Not two US ZIPs
 * side by side (02134 02139), nor a code after a label that says so (SKU 0201-123456).
 */
function redactTrunkPhone(match: string, _separator: string, offset: number, text: string): string {
  const groups = match.split(/[ /-]/);
  const digits = groups.reduce((sum, group) => sum + group.length, 0);
  if (digits < 9 || digits > 11 || NOT_TRUNK_PHONE_SHAPES.has(groups.map((group) => group.length).join())) return match;
  return afterCodeLabel(text, offset) ? match : REDACTED;
}

function redactNationalMobile(match: string, _separator: string | undefined, offset: number, text: string): string {
  return afterCodeLabel(text, offset) ? match : REDACTED;
}

/** A phone shape with as many digits as a phone number has (E.164: at most 15, the country code included). */
function redactPhone(match: string): string {
  const digits = match.replace(/\D/g, '').length;
  return digits >= 8 && digits <= 15 ? REDACTED : match;
}
