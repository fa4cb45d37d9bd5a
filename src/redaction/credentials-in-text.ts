import { REDACTED } from './markers.js';
import { AFTER_ESCAPE } from './token-shapes.js';
import { BLANK_CHARS } from './unicode-forms.js';

/**
 * scheme://user:password@host (and //user:password@host): the password goes, the user and host stay. The password
 * runs to the last "@" before a "/", "?" or "#"; or, written unencoded with those in it (an AWS secret key in
 * s3://AKIA…:wJal…/K7MD…@bucket), to the last "@" within 256 characters before a blank or a quote, unless it reads
 * as a port ("https://host:8443/path?x=a@b" has no password) or the rest of an IPv6 address ("http://[::1]:80/x@y").
 * Bounded, so each "//" costs at most 256 characters more.
 */
export const URL_PASSWORD =
  /(?<![A-Za-z0-9+.-])((?:[A-Za-z][A-Za-z0-9+.-]*:)?\/\/[^\s/?#@:"'<>\\]*:)(?:[^\s/?#"'<>\\]+|(?!\d+[/?#]|[\dA-Fa-f:.]*\])[^\s"'<>\\@][^\s"'<>\\]{0,255})@/g;

/**
 * scheme://credential@host where the credential is the user part: no password (a token alone, GitHub's
 * "https://<token>@github.com"), an empty one (an API key as the user, `curl -u KEY:`), or a placeholder one (GitHub's
 * "<token>:x-oauth-basic", "<key>:x"). The user part goes; a plain lower-case name (git, postgres, deploy) is no
 * secret and stays. Runs before URL_PASSWORD, which then takes any password, placeholders too. Linear: the user part
 * stops at "/".
 */
export const URL_USER_CREDENTIAL = /(?<![A-Za-z0-9+.-])((?:[A-Za-z][A-Za-z0-9+.-]*:)?\/\/)([^\s/?#@:"'<>\\[\]]+)(?=(?::(?:x-oauth-basic|[xX])?)?@)/g;

const PLAIN_USER_NAME = /^[a-z._-]{1,16}$/;

export function redactUrlUser(match: string, prefix: string, user: string): string {
  return PLAIN_USER_NAME.test(user) ? match : `${prefix}${REDACTED}`;
}

/**
 * "Basic <base64 of user:password>" outside an Authorization header (also right after an escape, AFTER_ESCAPE, as BEARER): "Basic" is also an English word,
 * so the credential must decode to printable "user:password" — as UTF-8, which browsers and clients send
 * (a password "pässwörd" is as secret as an ASCII one).
 */
export const BASIC = new RegExp(String.raw`(?:\b|${AFTER_ESCAPE})(Basic)[${BLANK_CHARS}]+([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])`, 'gi');
/** A replace with a function costs even when nothing matches; this test does not. */
export const HAS_BASIC = new RegExp(String.raw`(?:\b|${AFTER_ESCAPE})Basic[${BLANK_CHARS}]+[A-Za-z0-9+/]{4}`, 'i');

/**
 * Not printable: a control, format, unassigned or private-use character, or U+FFFD, which is what bytes that are no
 * UTF-8 decode to. An English word after "Basic" decodes to such bytes, not to "user:password".
 */
const NOT_PRINTABLE = /[\p{C}\uFFFD]/u;

export function redactBasic(match: string, scheme: string, credential: string): string {
  const decoded = Buffer.from(credential, 'base64').toString('utf8');
  return decoded.includes(':') && !NOT_PRINTABLE.test(decoded) ? `${scheme} ${REDACTED}` : match;
}

/**
 * An Authorization (or Proxy-Authorization, X-Authorization, HTTP_AUTHORIZATION) header written out
 * in text: a header dump, a curl command, JSON, a Ruby or PHP hash ("=>") or code inside a string.
 * Whatever the scheme (Basic, Token, Digest, AWS4-HMAC-SHA256, none), the credentials after it are
 * redacted; the scheme stays. A list of values (a Go header map, http.Header as JSON) goes whole.
 * Captures the quote that opens the value, if any. Blanks are any within a line (tab, space, no-break, thin, …: text
 * copied from a page or a typeset document has those), here and around the scheme and auth-params.
 */
const AUTHORIZATION = new RegExp(String.raw`(?<![A-Za-z0-9])authorization(?:\\?["'])?[${BLANK_CHARS}]*(?::|=>?)[${BLANK_CHARS}]*(?:(\\?["'])[${BLANK_CHARS}]*)?`, 'gi');
export const AUTHORIZATION_NAME = /(?<![A-Za-z0-9])authorization$/i;
/** An auth scheme: letters (one trailing digit, as AWS4), then hyphenated parts, then blanks. Longer words are credentials. */
const AUTH_SCHEME = new RegExp(String.raw`[A-Za-z]{1,30}\d?(?:-[A-Za-z0-9]{1,20}){0,4}[${BLANK_CHARS}]+`, 'y');
/**
 * auth-params (Digest username="x", Token token=abc) rather than a single token68: a name, "=", then a
 * token or a whole quoted string. Base64 padding before a closing quote (Basic dXNlcjpwYXNz=") is not one.
 */
const AUTH_PARAM = new RegExp(String.raw`[A-Za-z0-9!#$%*+.^_\`|~-]+[${BLANK_CHARS}]*=[${BLANK_CHARS}]*(?:"[^"\r\n]*"|[A-Za-z0-9!#$%*+.^_\`|~-])`, 'y');
/** Blanks percent-encoded (a space, a tab), as many as there are. */
const ENCODED_BLANKS = /(?:%20|%09)+/y;
/** Where a token68 credential ends when the value is not quoted. */
const TOKEN_END = /[\s"'\\;&<>]/g;
const LINE_END = /[\r\n]/g;

export function redactAuthorizationValues(text: string): string {
  let out = '';
  let cursor = 0;
  AUTHORIZATION.lastIndex = 0;
  for (let m = AUTHORIZATION.exec(text); m !== null; m = AUTHORIZATION.exec(text)) {
    let start = AUTHORIZATION.lastIndex;
    let end: number;
    if (m[1] === undefined && text[start] === '[') {
      // A list of values: Go's map[Authorization:[Bearer …]], http.Header as JSON {"Authorization":["SSWS …"]}. Read
      // as one value, "[Bearer" would pass for the credentials and the token after it stay; and a list may hold several
      // values, each with its own scheme: the whole list goes, to its closing bracket.
      end = text.startsWith(REDACTED, start) ? start : closingBracket(text, start);
    } else {
      // Blanks written percent-encoded (Authorization:%20Bearer …, a header pasted into a URL): read as blanks, or the
      // first word after them ("%20Bearer") passed for the credentials and the token after the raw blank stayed.
      ENCODED_BLANKS.lastIndex = start;
      if (ENCODED_BLANKS.test(text)) start = ENCODED_BLANKS.lastIndex;
      AUTH_SCHEME.lastIndex = start;
      if (AUTH_SCHEME.test(text) && isCredentialStart(text, AUTH_SCHEME.lastIndex)) start = AUTH_SCHEME.lastIndex;
      end = credentialEnd(text, start, m[1]);
    }
    if (end > start) {
      out += text.slice(cursor, start) + REDACTED;
      cursor = end;
      AUTHORIZATION.lastIndex = end;
    }
  }
  return cursor === 0 ? text : out + text.slice(cursor);
}

function isCredentialStart(text: string, at: number): boolean {
  return at < text.length && !/[\s"'\\,;]/.test(text[at]!);
}

/**
 * Inside quotes the credentials run to the closing quote; unquoted, a token68 runs to the next
 * delimiter and auth-params to the end of the line. Never past a line end. Each scan is consumed by
 * the caller, so the whole pass stays linear.
 */
function credentialEnd(text: string, start: number, quote: string | undefined): number {
  if (quote !== undefined) return closingQuote(text, start, quote);
  AUTH_PARAM.lastIndex = start;
  return indexOf(AUTH_PARAM.test(text) ? LINE_END : TOKEN_END, text, start);
}

/** The quote closing a value opened by `quote`: a plain quote, or an escaped one (JSON encoded inside the string). */
export function closingQuote(text: string, start: number, quote: string): number {
  const q = quote[quote.length - 1];
  const escaped = quote.length > 1;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (ch === '\n' || ch === '\r') return i;
    if (escaped) {
      if (ch === '\\' && text[i + 1] === q && text[i - 1] !== '\\') return i;
    } else if (ch === '\\') {
      i++;
    } else if (ch === q) {
      return i;
    }
  }
  return text.length;
}

/** Just past the bracket closing the one at `start`, skipping JSON strings; the text end if it never closes. */
export function closingBracket(text: string, start: number): number {
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

export function indexOf(pattern: RegExp, text: string, from: number): number {
  pattern.lastIndex = from;
  const m = pattern.exec(text);
  return m === null ? text.length : m.index;
}
