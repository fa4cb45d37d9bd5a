/**
 * What a property name says about its value. Names are compared lower-cased with
 * separators removed, so `api_key`, `apiKey`, `X-Api-Key` and `APIKEY` are one name.
 */
export function normalizeKey(key: string): string {
  return foldKey(key).toLowerCase().replace(/[^a-z0-9]/g, '');
}

const NON_ASCII = /[^\u0020-\u007e]/; // also control characters: NFKD leaves them, and they are dropped below anyway
const COMBINING_MARK = /\p{M}/gu;

/**
 * Cyrillic and Greek letters drawn like Latin ones (Cyrillic а е о р с у х, Greek Α Ο Ρ, lunate sigma ϲ): a key spelled
 * with them ("pаssword" with a Cyrillic а, "ΑPI_KEY" with a Greek Alpha) reads as its Latin twin to people and to the
 * tools that use it. Upper case stays upper case, so camelCase still splits the words.
 */
const CONFUSABLE_LETTERS: Readonly<Record<string, string>> = {
  // Cyrillic
  а: 'a', в: 'b', е: 'e', ё: 'e', к: 'k', м: 'm', н: 'h', о: 'o', р: 'p', с: 'c', т: 't', у: 'y', х: 'x', ѕ: 's', і: 'i', ї: 'i', ј: 'j', һ: 'h',
  ԁ: 'd', ԛ: 'q', ԝ: 'w', ӏ: 'l', ɡ: 'g',
  А: 'A', В: 'B', Е: 'E', Ё: 'E', К: 'K', М: 'M', Н: 'H', О: 'O', Р: 'P', С: 'C', Т: 'T', У: 'Y', Х: 'X', Ѕ: 'S', І: 'I', Ї: 'I', Ј: 'J',
  Һ: 'H', Ԁ: 'D', Ԛ: 'Q', Ԝ: 'W', Ӏ: 'I',
  // Greek
  Α: 'A', Β: 'B', Ε: 'E', Ζ: 'Z', Η: 'H', Ι: 'I', Κ: 'K', Μ: 'M', Ν: 'N', Ο: 'O', Ρ: 'P', Τ: 'T', Υ: 'Y', Χ: 'X', Ϲ: 'C', Ϳ: 'J',
  α: 'a', ι: 'i', κ: 'k', ν: 'v', ο: 'o', ρ: 'p', υ: 'u', χ: 'x', ϲ: 'c', ϳ: 'j',
};
const CONFUSABLE = new RegExp(`[${Object.keys(CONFUSABLE_LETTERS).join('')}]`, 'g');

/**
 * Compatibility forms decomposed and their marks dropped, so a full-width, ligature or accented spelling
 * (ｐａｓｓｗｏｒｄ, ﬁle, pässword, userPİN) reads as its ASCII letters instead of losing them, and normalizeKey and
 * keyWords read a name alike (İ lower-cases to "i" plus a combining dot, which would split the word "pin" in two).
 * Cyrillic and Greek look-alikes read as the Latin letters they pass for (CONFUSABLE_LETTERS): before NFKD, which
 * would make the lunate sigma ϲ a final sigma, and again after the marks go, so an accented "ό" is an "o" too. Only keys
 * with non-ASCII characters pay for it.
 */
function foldKey(key: string): string {
  if (!NON_ASCII.test(key)) return key;
  return unconfuse(unconfuse(key).normalize('NFKD').replace(COMBINING_MARK, ''));
}

const FORMAT_CHARS = /\p{Cf}/gu;

/**
 * A name as foldKey reads it, without the format characters (zero-width space, soft hyphen, joiners) that draw
 * nothing: "ｐａｓｓｗｏｒｄ", "pаssword" (Cyrillic а) and "pass\u200bword" read "password", as normalizeKey reads them.
 * For the checks of a name's shape (isSecretFieldName's FIELD_NAME), which would otherwise see non-ASCII characters.
 */
export function foldedName(name: string): string {
  return NON_ASCII.test(name) ? foldKey(name).replace(FORMAT_CHARS, '') : name;
}

/**
 * Text that may spell an ASCII name otherwise: a full-width letter (ｐａｓｓｗｏｒｄ), a mathematical alphanumeric
 * (𝐩𝐚𝐬𝐬𝐰𝐨𝐫𝐝: U+1D400–U+1D7FF, a surrogate pair), or a Cyrillic or Greek look-alike next to a Latin letter (pаssword
 * with a Cyrillic а). Text written wholly in Greek, Cyrillic, CJK or with accents does not (ΠΡΙΝ is no PIN, Secrétariat
 * no secret), nor do full-width digits alone, usual in CJK text, which the card, phone and tax-id scans read anyway
 * (unicode-forms.ts): it is read as written, at the cost of one test.
 */
export function spellsAsciiOtherwise(text: string): boolean {
  return WIDE_OR_MATH.test(text) || MIXED_SCRIPT.test(text);
}
const WIDE_OR_MATH = /[\uFF21-\uFF3A\uFF41-\uFF5A]|\uD835[\uDC00-\uDFFF]/;
const CONFUSABLE_CLASS = Object.keys(CONFUSABLE_LETTERS).join('');
const MIXED_SCRIPT = new RegExp(`[A-Za-z\\uFF21-\\uFF3A\\uFF41-\\uFF5A][${CONFUSABLE_CLASS}]|[${CONFUSABLE_CLASS}][A-Za-z\\uFF21-\\uFF3A\\uFF41-\\uFF5A]`);

/**
 * The ASCII that text spelled otherwise (spellsAsciiOtherwise) passes for: full-width letters, digits and the
 * characters of a name and its separator (＿ － ＝ ： ＂ ＇) as their ASCII, mathematical alphanumerics as theirs (NFKC),
 * and look-alike letters as Latin inside a word that also holds a Latin letter. Nothing else changes: not accents,
 * not a word wholly in another script, not ＠ or ． (a unit price, ＠１５０．２５, is no e-mail address).
 */
export function readAsAscii(text: string): string {
  const wide = text.replace(WIDE_ASCII, (ch) => String.fromCharCode(ch.charCodeAt(0) - 0xfee0)).replace(MATH_ALNUM, (ch) => ch.normalize('NFKC'));
  return wide.replace(WORD, (word) => (LATIN_LETTER.test(word) ? unconfuse(word) : word));
}
const WIDE_ASCII = /[\uFF10-\uFF19\uFF21-\uFF3A\uFF41-\uFF5A\uFF3F\uFF0D\uFF1D\uFF1A\uFF02\uFF07]/g;
const MATH_ALNUM = /\uD835[\uDC00-\uDFFF]/g;
const WORD = /\p{L}+/gu;
const LATIN_LETTER = /[A-Za-z]/;

function unconfuse(key: string): string {
  return key.replace(CONFUSABLE, (letter) => CONFUSABLE_LETTERS[letter]!);
}

/**
 * The words of a name, lower-cased: split at anything not a letter or digit (DB_PASS, card[cvc], X-Api-Key), at
 * camelCase (smtpPwd, userPIN, PINCode) and between letters and digits (cvv2, pass1).
 */
export function keyWords(key: string): string[] {
  return foldKey(key)
    .replace(/[a-z](?=[A-Z])|[A-Z](?=[A-Z][a-z])|[A-Za-z](?=\d)|\d(?=[A-Za-z])/g, '$& ')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((word) => word !== '');
}

/**
 * Where a name/value pair keeps the name: HAR and fetch headers, Postman and AWS key/value, form fields, metafields, and
 * the label or title of a form answer or a settings screen ({label: "API Key", value}); HubSpot v1 {property, value},
 * {attribute, value} and {variable, value} lists, CloudFormation {ParameterKey, ParameterValue}; and where it keeps
 * the value under another member: a Cloudflare Workers binding {type: "secret_text", name, text}, {name, data},
 * {name, content}.
 */
const PAIR_NAME_KEYS = new Set([
  'name', 'key', 'header', 'headername', 'param', 'paramname', 'parameter', 'field', 'fieldname', 'label', 'title',
  'property', 'attribute', 'variable', 'parameterkey',
]);
const PAIR_VALUE_KEYS = new Set(['value', 'values', 'val', 'headervalue', 'paramvalue', 'fieldvalue', 'text', 'data', 'content', 'parametervalue']);

/**
 * Where a pair says what KIND of value it holds rather than its name: Onfido id_numbers[] {type: "ssn", value},
 * document_numbers[] {type: "document_number", value}, Zendesk identities {type, value}. The same members hold a
 * discount's {type: "percentage", value: 10} or a metafield's type, so a kind hides its value only when it names a
 * secret or identity data (isSecretFieldName, isIdentityKind: the walker's isSensitivePair), never by the wider
 * personal-data names.
 */
const PAIR_TYPE_KEYS = new Set(['type', 'kind', 'idtype']);

/** Takes the raw key: every object is asked, so most keys are turned away by their length before being normalised. */
export function isPairNameKey(key: string): boolean {
  return key.length <= 14 && PAIR_NAME_KEYS.has(normalizeKey(key));
}

/** Takes the raw key, as isPairNameKey. */
export function isPairTypeKey(key: string): boolean {
  return key.length <= 7 && PAIR_TYPE_KEYS.has(normalizeKey(key));
}

export function isPairValueKey(norm: string): boolean {
  return PAIR_VALUE_KEYS.has(norm);
}

/**
 * Identifiers, not free text: a 13-19 digit id that happens to pass Luhn is not a card number. Product codes too: an
 * EAN-13 of a German maker (400-440) starts with 4 as a 13-digit Visa does, and one in ten passes Luhn (SP-API's
 * identifiers[].identifier, searchCatalogItems' identifiers=; GTIN, UPC, ISBN).
 */
export function isIdentifierKey(key: string): boolean {
  if (/^(?:id|ids|gid|uuid)$/i.test(key) || /(?:Id|ID|Ids|IDs|_id|_ids|-id)$/.test(key)) return true;
  const norm = normalizeKey(key);
  return norm.includes('tracking') || norm.includes('sku') || norm.includes('barcode') || norm.includes('identifier') || PRODUCT_CODE_NAME.test(norm);
}
const PRODUCT_CODE_NAME = /^(?:ean|ean13|ean8|gtin|gtin\d{1,2}|upc|upca|upce|isbn|isbn10|isbn13|jan|asin)s?$/;
