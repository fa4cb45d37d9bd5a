import { AUTHORIZATION_NAME, closingQuote, indexOf } from './credentials-in-text.js';
import { REDACTED } from './markers.js';
import { normalizeKey } from './redaction-keys.js';
import { isSecretFieldName, SECRET_NAME_MIN_LETTERS } from './secret-keys.js';

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
 * scheme://user:password@host to URL_PASSWORD. Only ":" here: name=value is SECRET_PARAM's.
 *
 * Driven by indexOf(":") rather than a regex: most strings with a colon are timestamps and prose, and a
 * pattern would try a name at every word of them. Each colon is looked at once, and the name before it
 * never reaches back past the previous colon, so the pass is linear.
 */
export function redactSecretFields(text: string): string {
  let out = '';
  let cursor = 0;
  for (let colon = text.indexOf(':'); colon >= 0; ) {
    let next = colon + 1;
    const toLineEnd = secretFieldBefore(text, colon);
    if (toLineEnd !== undefined) {
      let start = skipBlanks(text, colon + 1);
      const quoteLength = text[start] === '\\' && isQuote(text[start + 1]) ? 2 : isQuote(text[start]) ? 1 : 0;
      const quote = quoteLength > 0 ? text.slice(start, start + quoteLength) : undefined;
      if (quote !== undefined) start = skipBlanks(text, start + quoteLength);
      const end = fieldValueEnd(text, start, quote, toLineEnd);
      if (end > start) {
        out += text.slice(cursor, start) + REDACTED;
        cursor = end;
        next = end;
      }
    }
    colon = text.indexOf(':', next);
  }
  return cursor === 0 ? text : out + text.slice(cursor);
}

/**
 * Whether the colon at `colon` follows a secret name: the name, perhaps closed by a quote (or an escaped
 * one), then blanks. undefined when it does not; otherwise whether the value runs to the line end.
 */
function secretFieldBefore(text: string, colon: number): boolean | undefined {
  let end = colon;
  while (end > 0 && (text[end - 1] === ' ' || text[end - 1] === '\t')) end--;
  if (end > 0 && isQuote(text[end - 1])) end -= end > 1 && text[end - 2] === '\\' ? 2 : 1;
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
  // Authorization, Proxy-Authorization, …: redactAuthorizationValues has redacted it and kept the scheme.
  if (AUTHORIZATION_NAME.test(raw)) return undefined;
  if (!isSecretFieldName(name) && !isSecretTwoWordLabel(text, start, name)) return undefined;
  const norm = normalizeKey(name);
  return norm.includes('cookie') || norm.endsWith('authorization');
}

/**
 * A label for people written out in text, of two words whose last alone names no secret: "API Key: …", "Secret Key:
 * …", "Access Key: …" (while "Client Secret:" and "Access Token:" are caught by their last word). The word before
 * `name`, one blank apart, joined to it, is asked as the label it is ({label: "API Key", value} is secret): "Primary Key:"
 * and "Token Pack:" stay. Looks back one word of at most 64 characters, so each colon still costs a bounded scan.
 */
function isSecretTwoWordLabel(text: string, start: number, name: string): boolean {
  const blank = start - 1;
  if (blank < 1 || (text[blank] !== ' ' && text[blank] !== '\t')) return false;
  let first = blank;
  while (first > 0 && blank - first < 64 && isLetter(text.charCodeAt(first - 1))) first--;
  if (first === blank || (first > 0 && isNameChar(text.charCodeAt(first - 1)))) return false;
  return isSecretFieldName(`${text.slice(first, blank)} ${name}`);
}

/** A character of a field name: what SECRET_PARAM's names are made of, [\w.%[\]-]. */
function isNameChar(c: number): boolean {
  return isLetter(c) || (c >= 0x30 && c <= 0x39) || c === 0x5f || c === 0x2e || c === 0x25 || c === 0x5b || c === 0x5d || c === 0x2d;
}

function isLetter(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a);
}

function isQuote(ch: string | undefined): boolean {
  return ch === '"' || ch === "'";
}

function skipBlanks(text: string, from: number): number {
  let i = from;
  while (text[i] === ' ' || text[i] === '\t') i++;
  return i;
}

/** Where an unquoted single-token value ends: a key, a signature or an id never holds a blank or these. */
const FIELD_TOKEN_END = /[\s"'\\,;&<>(){}[\]]/g;
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

/** Just past the bracket closing the one at `start`, skipping JSON strings; the text end if it never closes. */
function closingBracket(text: string, start: number): number {
  let depth = 0;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (ch === '[' || ch === '{') {
      depth++;
    } else if (ch === ']' || ch === '}') {
      if (--depth === 0) return i + 1;
    } else if (ch === '\\') {
      i++;
    } else if (ch === '"') {
      i = closingQuote(text, i + 1, '"');
    }
  }
  return text.length;
}
