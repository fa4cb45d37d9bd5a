import { AUTHORIZATION_NAME, closingBracket, closingQuote, indexOf } from './credentials-in-text.js';
import { REDACTED } from './markers.js';
import { normalizeKey } from './redaction-keys.js';
import { isSecretFieldName, SECRET_NAME_MIN_LETTERS } from './secret-keys.js';
import { BLANK_CHARS } from './unicode-forms.js';

/**
 * "Name: value" where the name is a secret one, written out in text: a header line of a dump or an echoed
 * request (X-Api-Key: …, x-shopify-access-token: …, Cookie: …), a curl -H argument, a key of JSON, YAML,
 * a Python dict or a Go header map inside a string ("x-api-key": "…", {'Set-Cookie': '…'},
 * map[X-Api-Key:[…]]).
 *
 * Which names: exactly those isSecretFieldName calls secret, the rule for property names and
 * {name, value} pairs, so that there is one definition of a secret name. The consequence, chosen on
 * purpose: a secret word before a colon in prose loses what follows, as the same word as a key would;
 * "invalid token: expired" becomes "invalid token: [REDACTED]", as {token: "expired"} becomes
 * {token: "[REDACTED]"}. A ledger entry short of one word of an error message is the accepted cost; a
 * credential in it is not. Prose whose word before the colon is not a secret name stays whole
 * ("status: expired", "Token Pack: 10 left", "Content-Type: …"), and so does a path
 * ("POST /oauth/token: 401"): a name never starts right after "/", which also leaves
 * scheme://user:password@host to URL_PASSWORD. ":" and "=>" here: name=value is redactSecretParams'.
 *
 * "=>" is the ":" of a Ruby Hash#inspect ({"access_token"=>"…"}, {:password=>"…"}), PHP's print_r ([api_key] => …)
 * and var_export ('client_secret' => '…'), Perl's Data::Dumper and Elixir maps: the same name and value rules.
 *
 * The value may stand on the line after the name ("Password:\nhunter2", a YAML key over its value, a form
 * copied out of a page): see valueStart. Not after "=>": none of those writes a value there (print_r's
 * "[api_key] => " over "[user] => bob" is an empty value, not the next line's).
 *
 * Driven by indexOf(":") rather than a regex: most strings with a colon are timestamps and prose, and a
 * pattern would try a name at every word of them. Each colon is looked at once, and the name before it
 * never reaches back past the previous colon, so the pass is linear. Only the last colon of a line can
 * look on to the next line, so each line is looked at from the one before at most once. The "=>" pass is
 * another such pass: "=" and ">" are no name characters either.
 */
export function redactSecretFields(text: string): string {
  const fields = text.includes(':') ? redactFieldsAfter(text, ':') : text;
  return fields.includes('=>') ? redactFieldsAfter(fields, '=>') : fields;
}

function redactFieldsAfter(text: string, operator: ':' | '=>'): string {
  let out = '';
  let cursor = 0;
  for (let colon = text.indexOf(operator); colon >= 0; ) {
    let next = colon + operator.length;
    // {"password:": "…"}: this colon is the key's own; the separator after the key's quote is looked at in turn.
    if (isNameChar(text.charCodeAt(colon - 1)) && closesQuotedKey(text, next)) {
      colon = text.indexOf(operator, next);
      continue;
    }
    const toLineEnd = secretFieldBefore(text, colon);
    let start = toLineEnd === undefined ? -1 : valueStart(text, colon + operator.length, operator === ':');
    if (toLineEnd !== undefined && start >= 0) {
      const quoteLength = quoteLengthAt(text, start);
      const quote = quoteLength > 0 ? text.slice(start, start + quoteLength) : undefined;
      if (quote !== undefined) start = skipBlanks(text, start + quoteLength);
      const end = fieldValueEnd(text, start, quote, toLineEnd);
      if (end > start) {
        out += text.slice(cursor, start) + REDACTED;
        cursor = end;
        next = end;
      }
    }
    colon = text.indexOf(operator, next);
  }
  return cursor === 0 ? text : out + text.slice(cursor);
}

/**
 * Whether the colon (or "=>") at `colon` follows a secret name: the name, perhaps closed by a quote (or an escaped
 * one), then blanks. undefined when it does not; otherwise whether the value runs to the line end.
 */
function secretFieldBefore(text: string, colon: number): boolean | undefined {
  let end = colon;
  while (end > 0 && isBlank(text[end - 1])) end--;
  if (end > 0 && isQuote(text[end - 1])) {
    end -= end > 1 && text[end - 2] === '\\' ? 2 : 1;
    // A quoted key may end with a colon or "=" of its own ({"password:": "…"}, {"api_key=": "…"}): the name is before it.
    if (end > 0 && (text[end - 1] === ':' || text[end - 1] === '=')) end--;
  }
  let start = end;
  let letters = 0;
  while (start > 0 && isNameChar(text.charCodeAt(start - 1))) {
    start--;
    if (isLetter(text.charCodeAt(start))) letters++;
  }
  // Timestamps and times ("14:05:11") have too few letters to be asked; a field name has at most 128 characters (129 with an escape's n).
  if (letters < SECRET_NAME_MIN_LETTERS || end - start > 129 || (start > 0 && text[start - 1] === '/')) return undefined;
  const raw = text.slice(start, end);
  // A dump encoded twice reads "…\r\nX-Api-Key: …": the n of the escape is not part of the name.
  const name = start > 0 && text[start - 1] === '\\' && /^[nrt]./.test(raw) ? raw.slice(1) : raw;
  // Authorization, Proxy-Authorization, …: redactAuthorizationValues has redacted it and kept the scheme (or taken a
  // [list] whole), unless the credentials stand on the next line, where it does not look: then they go here, the
  // scheme with them.
  if (AUTHORIZATION_NAME.test(raw)) return lineBreakLength(text, skipBlanks(text, colon + 1)) > 0 ? true : undefined;
  if (!isSecretFieldName(name) && !isSecretTwoWordLabel(text, start, name)) return undefined;
  const norm = normalizeKey(name);
  return norm.includes('cookie') || norm.endsWith('authorization');
}

/**
 * A label for people written out in text, of two words whose last alone names no secret: "API Key: …", "Secret Key:
 * …", "Access Key: …" (while "Client Secret:" and "Access Token:" are caught by their last word). The word before
 * `name`, joined to it by one blank, is asked as the label it is ({label: "API Key", value} is secret): "Primary Key:"
 * and "Token Pack:" stay. Between the words any horizontal blanks, a few of them: text taken from HTML has a no-break
 * space ("API&nbsp;Key"), typeset text a narrow one, aligned text two spaces; a line break parts two lines, not two
 * words. The first word may follow a hyphen ("Stripe-API Key": its last two words are "API Key"), not another character
 * of a name ("my_API Key", "x.API Key" are identifiers). Looks back at most 8 blanks and one word of at most 64
 * characters, so each colon still costs a bounded scan.
 */
function isSecretTwoWordLabel(text: string, start: number, name: string): boolean {
  let blank = start;
  while (blank > 0 && start - blank < 8 && HORIZONTAL_SPACE.test(text[blank - 1]!)) blank--;
  if (blank === start) return false;
  let first = blank;
  while (first > 0 && blank - first < 64 && isLetter(text.charCodeAt(first - 1))) first--;
  if (first === blank || (first > 0 && text[first - 1] !== '-' && isNameChar(text.charCodeAt(first - 1)))) return false;
  return isSecretFieldName(`${text.slice(first, blank)} ${name}`);
}

/** A blank within a line: whitespace but a line break (\r, \n, U+2028, U+2029). */
const HORIZONTAL_SPACE = /[^\S\r\n\u2028\u2029]/;

/** A character of a field name: what redactSecretParams' names are made of, [\w.%[\]-]. */
function isNameChar(c: number): boolean {
  return isLetter(c) || (c >= 0x30 && c <= 0x39) || c === 0x5f || c === 0x2e || c === 0x25 || c === 0x5b || c === 0x5d || c === 0x2d;
}

function isLetter(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a);
}

function isQuote(ch: string | undefined): boolean {
  return ch === '"' || ch === "'";
}

/** A blank within a line around a name's colon: a space, a tab, or another Unicode space (no-break, thin, …: \p{Zs}). */
function isBlank(ch: string | undefined): boolean {
  return ch === ' ' || ch === '\t' || (ch !== undefined && ch > '\u007f' && UNICODE_BLANK.test(ch));
}
const UNICODE_BLANK = new RegExp(`[${BLANK_CHARS}]`);

function skipBlanks(text: string, from: number): number {
  let i = from;
  while (isBlank(text[i])) i++;
  return i;
}

/**
 * Where the value after a secret name's colon starts: past the blanks on its line, or, when nothing follows the colon
 * there, on the next line: past one line break (\n, \r\n, \r, or one escaped inside a JSON string, "\\n"), its blanks
 * and a YAML list's "- ". Never two line breaks: a blank line ends the field. -1 when the next line opens a field of its
 * own ("Password:\nUsername: bob"): the field was empty, and its value taken as "Username:" would carry the next
 * field's colon away unasked.
 */
function valueStart(text: string, from: number, nextLine: boolean): number {
  const start = skipBlanks(text, from);
  const lineBreak = lineBreakLength(text, start);
  if (lineBreak === 0) return start;
  if (!nextLine) return -1;
  let next = skipBlanks(text, start + lineBreak);
  if (text[next] === '-' && isBlank(text[next + 1])) next = skipBlanks(text, next + 1);
  return opensField(text, next) ? -1 : next;
}

/** The length of the line break at `i`, as written or escaped inside a JSON string; 0 when there is none. */
function lineBreakLength(text: string, i: number): number {
  const ch = text[i];
  if (ch === '\n') return 1;
  if (ch === '\r') return text[i + 1] === '\n' ? 2 : 1;
  if (ch !== '\\') return 0;
  if (text[i + 1] === 'n') return 2;
  if (text[i + 1] !== 'r') return 0;
  return text[i + 2] === '\\' && text[i + 3] === 'n' ? 4 : 2;
}

/**
 * Whether a field starts at `i`: a name, perhaps quoted, blanks, then a colon that a value token would end at ("Host:
 * …", "\"id\": 1", "token:[…]"). Not "admin:hunter2" or "https://…": taken whole as a value, they leave nothing out.
 * Reads at most a quote, a name's 129 characters and the blanks after it.
 */
function opensField(text: string, i: number): boolean {
  let at = i + quoteLengthAt(text, i);
  const nameStart = at;
  while (at < text.length && at - nameStart <= 129 && isNameChar(text.charCodeAt(at))) at++;
  if (at === nameStart) return false;
  at = skipBlanks(text, at + quoteLengthAt(text, at));
  return text[at] === ':' && (at + 1 === text.length || FIELD_TOKEN_END_CHAR.test(text[at + 1]!));
}

/**
 * Whether a quoted key closes at `i`: a quote (or an escaped one), blanks, then the ":" or "=>" of JSON, a Python dict or
 * a Ruby Hash. Said of the text after a name's own ":" or "=" ({"password:": "…"}, {"api_key=": "…"}): that operator
 * is part of the key, and the value follows the separator. Reads a quote and the blanks after it.
 */
export function closesQuotedKey(text: string, i: number): boolean {
  const quote = quoteLengthAt(text, i);
  if (quote === 0) return false;
  const at = skipBlanks(text, i + quote);
  return text[at] === ':' || (text[at] === '=' && text[at + 1] === '>');
}

/** 2 for an escaped quote at `i`, 1 for a quote, else 0. */
function quoteLengthAt(text: string, i: number): number {
  return text[i] === '\\' && isQuote(text[i + 1]) ? 2 : isQuote(text[i]) ? 1 : 0;
}

/** Where an unquoted single-token value ends: a key, a signature or an id never holds a blank or these. */
const FIELD_TOKEN_END_CHARS = String.raw`[\s"'\\,;&<>(){}[\]]`;
const FIELD_TOKEN_END = new RegExp(FIELD_TOKEN_END_CHARS, 'g');
const FIELD_TOKEN_END_CHAR = new RegExp(FIELD_TOKEN_END_CHARS);
/** Cookie: a=1; b=2 is a list of secrets, and an Authorization value has auth-params: they run to the line end. */
const FIELD_LINE_END = /[\r\n"'\\<>]/g;

/**
 * Where the value after "Name:" ends: at its closing quote; for a cookie or authorization at the line end;
 * for a [list] or {object} (JSON or a Go header map) at its closing bracket, the whole container going as it
 * would under a secret key; otherwise at the end of one token. null, true and false stay, as they do under
 * a secret key, and so does "token::x" (code, not a field) and a value that is already [REDACTED].
 * Every scan is consumed by the caller when it finds something, so the pass stays linear.
 */
function fieldValueEnd(text: string, start: number, quote: string | undefined, toLineEnd: boolean): number {
  if (quote !== undefined) return closingQuote(text, start, quote);
  if (toLineEnd) return indexOf(FIELD_LINE_END, text, start);
  const first = text[start];
  if (first === '[' || first === '{') return text.startsWith(REDACTED, start) ? start : closingBracket(text, start);
  if (first === ':') return start;
  const end = indexOf(FIELD_TOKEN_END, text, start);
  if (end - start <= 5 && /^(?:null|true|false)$/.test(text.slice(start, end))) return start;
  return end;
}
