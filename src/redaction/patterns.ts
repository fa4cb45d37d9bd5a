/**
 * Secrets and personal data recognised by their shape inside free text.
 * Every pattern is anchored on a boundary so it starts at most once per token:
 * the text can be 10,000 characters of vendor output and must not cost quadratic time.
 */
import { isSecretFieldName, isSecretName, normalizeKey, SECRET_NAME_MIN_LETTERS } from './redaction-keys.js';

export const REDACTED = '[REDACTED]';

/** PEM (RSA, EC, PKCS#8, OpenSSH) and PGP armour ("… PRIVATE KEY BLOCK-----"); an unterminated block goes to the end. */
const PRIVATE_KEY_BLOCK = /-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*$)/g;
// Also right after an escaped line end (\\n in text encoded twice), where \b sees no word start.
const BEARER = /(?:\b|(?<=\\[nrt]))(Bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*/gi;
/**
 * Where a token may start: not inside a run of letters and digits ("_" is a separator: key_sk_live_…), or right after
 * an escape that ends in one: \n, \r, \t or \u0026 of text encoded twice, %3D of a percent-encoded URL.
 * The check is a lookbehind placed after the token's fixed head, not before it: a pattern that opens with its
 * literal head is searched for at native speed, one opening with a lookbehind is tried at every position, many times slower.
 * Each lookbehind reads at most the head and six characters back, so every position is still tried once.
 */
const AFTER_ESCAPE = String.raw`(?<=\\[nrt]|\\u[0-9A-Fa-f]{4}|%[0-9A-Fa-f]{2})`;
function token(head: RegExp, tail: RegExp, notAfter = '[A-Za-z0-9]'): RegExp {
  return new RegExp(`${head.source}(?<=(?:(?<!${notAfter})|${AFTER_ESCAPE})${head.source})${tail.source}`, 'g');
}
/** Not after "_" or "-" either: those are base64url characters, and a JWT does not start inside a run of them. */
const JWT = token(/eyJ/, /[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/, '[A-Za-z0-9_-]');
/** [head, tail] of each vendor token: the head is a fixed prefix the vendor puts on every one. */
const VENDOR_TOKEN_SHAPES: readonly (readonly [RegExp, RegExp])[] = [
  [/shp(?:at|ca|pa|ss|ua|rt)_/, /[A-Za-z0-9]{16,}/], // Shopify access / custom app / private app / shared secret / refresh
  [/Atz[ar]/, /(?:\|[^\s"'<>,;]+|%7[Cc][^\s"'<>,;&]+)/], // Login with Amazon access (Atza|) and refresh (Atzr|) tokens, "|" perhaps as %7C
  [/amzn1\.oa2-cs\.v1\./, /[A-Za-z0-9]{16,}/], // Login with Amazon client secrets
  [/[sr]k_(?:live|test)_/, /[A-Za-z0-9]{10,}/], // Stripe secret and restricted keys
  [/gh[pousr]_/, /[A-Za-z0-9]{20,}/], // GitHub tokens, classic
  [/github_pat_/, /[A-Za-z0-9_]{22,}/], // GitHub fine-grained tokens
  // Slack bot, user, client and configuration tokens (xoxb-, xoxp-, xoxc-, xoxe-1-), rotating refresh tokens (xoxe.xoxp-1-…)
  // and app-level tokens (xapp-1-…)
  [/xox/, /(?:[abcdeprs]|e\.xox[a-z])-[A-Za-z0-9-]{10,}/],
  [/xapp-/, /\d-[A-Za-z0-9-]{10,}/],
  [/A(?:KIA|SIA)/, /[0-9A-Z]{16}\b/], // AWS access key ids, long-term and temporary
  [/AIza/, /[0-9A-Za-z_-]{35}/], // Google API keys
  [/ya29\./, /[A-Za-z0-9_.-]{20,}/], // Google OAuth access tokens
  [/GOCSPX-/, /[A-Za-z0-9_-]{20,}/], // Google OAuth client secrets
  [/sk-(?:proj|ant|svcacct|admin)-/, /[A-Za-z0-9_-]{20,}/], // OpenAI project / service-account / admin keys, Anthropic keys
  // OpenAI user keys of before project keys: "sk-" then exactly 48 letters and digits (a short head, so the whole length is asked)
  [/sk-/, /[A-Za-z0-9]{48}(?![A-Za-z0-9_-])/],
  [/glpat-/, /[A-Za-z0-9_-]{20,}/], // GitLab personal access tokens
  [/SG\./, /[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}/], // SendGrid API keys
  [/whsec_/, /[A-Za-z0-9+/=]{20,}/], // Stripe (and Svix) webhook signing secrets
  [/npm_/, /[A-Za-z0-9]{36}\b/], // npm access tokens
  [/hf_/, /[A-Za-z0-9]{34}(?![A-Za-z0-9_-])/], // Hugging Face access tokens: a short head, so the whole length is asked
  [/pypi-/, /AgE[A-Za-z0-9_-]{50,}/], // PyPI API tokens (a macaroon, always "AgE…" once base64-encoded)
  [/tgw_/, /[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/], // this gateway's own API keys (src/auth/api-key-hash.ts): 32 random bytes, base64url
];
const VENDOR_TOKENS = VENDOR_TOKEN_SHAPES.map(([head, tail]) => token(head, tail));
/**
 * Every head as one pattern: most strings hold none, and one search for all of them costs a fraction of a replace per
 * shape, which costs even when nothing matches.
 */
const VENDOR_TOKEN_HEAD = new RegExp(VENDOR_TOKEN_SHAPES.map(([head]) => head.source).join('|'));
/**
 * A Telegram bot token, 123456789:AAH…: the bot's id (public), a colon, then 35 characters that start with "A" (34 in
 * the examples of Telegram's own documentation, copied into many configs). The colon and "A" are the head searched
 * for; the id is only looked back at, and stays.
 */
const TELEGRAM_BOT_TOKEN = /:A(?<=(?<!\d)\d{5,16}:A)[A-Za-z0-9_-]{33,34}(?![A-Za-z0-9_-])/g;
/** A Slack incoming webhook (or workflow trigger) URL: its path is the credential, anyone holding it can post. */
const SLACK_WEBHOOK = /(hooks\.slack\.com(?:\/|%2[Ff])(?:services|workflows|triggers)(?:\/|%2[Ff]))(?:[A-Za-z0-9_-]|\/|%2[Ff])+/g;
/** US SSN 123-45-6789 and EIN 12-3456789, not when part of a longer dash-joined number (Amazon 112-0000001-1234567). */
const TAX_ID = /(?<!\d)(?<!\d-)(?:\d{3}-\d{2}-\d{4}|\d{2}-\d{7})(?!\d)(?!-\d)/g;
/** The SSN written with spaces (123 45 6789), not inside a longer run of space-separated digit groups. */
const TAX_ID_SPACED = /(?<!\d)(?<!\d )\d{3} \d{2} \d{4}(?!\d)(?! \d)/g;
/**
 * Digit groups joined by single spaces, no-break spaces (U+00A0, U+202F), dashes or dots, not glued to a preceding
 * letter (UPS 1Z999AA10123456784).
 */
const DIGIT_RUN = /(?<![A-Za-z0-9])\d+(?:[ \u00a0\u202f.-]\d+)*/g;
/** Internationalised too: letters and digits of any script in the local part and the domain (jöhn@exämple.com). */
const EMAIL = /(?<![\p{L}\p{N}._%+-])[\p{L}\p{N}._%+-]+@[\p{L}\p{N}-]+(?:\.[\p{L}\p{N}-]+)+/gu;
/**
 * Only unmistakable phone shapes: "+" then a country code, or a parenthesised area code. A parenthesised trunk
 * or area code may be glued to the next group (+44 (0)20 7946 0958). Groups may be split by no-break spaces
 * (U+00A0, U+202F), as French typesetting does.
 * Bare digit strings are left alone: they are far more often order ids, amounts or dates.
 */
const PHONE =
  /(?<![A-Za-z0-9+])(?:\+[1-9]\d{0,2}(?:[ \u00a0\u202f.-]?\(\d{1,4}\)[ \u00a0\u202f.-]?\d{1,4}(?:[ \u00a0\u202f.-]\d{1,4}){1,4}|(?:[ \u00a0\u202f.-]\d{1,4}){2,5})|\+[1-9]\d{7,14}|\(\d{2,4}\)[ \u00a0\u202f.-]?\d{3,4}[ \u00a0\u202f.-]?\d{4})(?!\d)/g;
/**
 * The international prefix written 00 instead of "+" (0044 20 7946 0958): at least two more groups, joined by
 * spaces or dashes only, not dots (001.002.003.004 is a padded address, not a phone), and not a group inside a
 * longer run of digit groups (an account number, a card).
 */
const PHONE_00 = /(?<![\w.+-])(?<!\d[ -])00[1-9]\d{0,2}(?:[ -]?\(\d{1,4}\)[ -]?\d{1,4}(?:[ -]\d{1,4}){1,4}|(?:[ -]\d{1,4}){2,5})(?!\d)/g;
/**
 * A North American number written 415-555-2671 or 415.555.2671: three groups, one separator used twice, an area
 * code that cannot start with 0 or 1; perhaps after the country code written 1- (1-415-555-2671, not 1.415.555.2671,
 * a version). Not part of a longer dotted or dashed number (an Amazon 3-7-7 id, a version).
 */
const NANP_PHONE = /(?<![\w.+-])(?:1-(?=\d{3}-))?[2-9]\d{2}([-.])\d{3}\1\d{4}(?!\w|[-.]\d)/g;
/**
 * An IBAN: country, two check digits, then 11 to 30 letters and digits, contiguous or in the printed groups of four.
 * Only one whose check digits hold (ISO 13616 mod 97) goes: a product code of that shape passes one time in 97.
 */
const IBAN = /(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])/g;

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
  if (out.includes('@') && out.includes('//')) out = out.replace(URL_PASSWORD, `$1${REDACTED}@`);
  if (out.length > 4 && out.includes(':')) out = redactSecretFields(out);
  if (out.includes('=')) out = out.replace(SECRET_PARAM, redactParam);
  if (out.includes('%') && ENCODED_EQUALS.test(out)) out = out.replace(ENCODED_SECRET_PARAM, redactEncodedParam);
  if (out.includes('</')) out = out.replace(XML_ELEMENT, redactXmlElement);
  if (options.cards) out = redactCardNumbers(out);
  return out.replace(TAX_ID, REDACTED).replace(TAX_ID_SPACED, REDACTED);
}

/**
 * <password>…</password>, <ApiKey>…</ApiKey>, <ns:ClientSecret a="b">…</ns:ClientSecret>: an element named like a secret
 * (the name without its namespace prefix, judged as a property name), whose text content goes. Each "<" starts at most
 * one attempt, which reads no further than the next "<": the pass stays linear.
 */
const XML_ELEMENT = /<([A-Za-z_][\w.:-]{0,127})((?:\s[^<>]*)?>)([^<]*)<\/\1\s*>/g;

function redactXmlElement(match: string, name: string, rest: string, content: string): string {
  const local = name.slice(name.lastIndexOf(':') + 1);
  if (content.trim() === '' || !isSecretFieldName(local)) return match;
  return `<${name}${rest}${REDACTED}</${name}>`;
}

/**
 * name=value with a secret-like name (access_token, client_secret, X-Api-Key, auth[token]) in a URL,
 * a bare query string, a path or prose; the name is judged as a property name would be. A name starts
 * only where a run of name characters starts, so each run is tried once; a value never starts with "="
 * ("token==null" is code, not a parameter).
 */
const SECRET_PARAM = /(?<![\w.%[\]-])([\w.%[\]-]+)([ \t]*=[ \t]*)(?:"[^"\r\n]*"|'[^'\r\n]*'|[^\s&#;"'<>\\=][^\s&#;"'<>\\]*)/g;

/**
 * Also the assignments of config files and code: api_key="…", password = hunter2, SECRET='…' (the quotes stay,
 * the value goes). An empty quoted value has nothing to hide.
 */
function redactParam(match: string, name: string, equals: string): string {
  // authorization=… was handled by redactAuthorizationValues, which keeps the scheme.
  if (AUTHORIZATION_NAME.test(name)) return match;
  if (!isSecretName(name.includes('%') ? percentDecoded(name) : name)) return match;
  const value = match.slice(name.length + equals.length);
  const quote = value[0] === '"' || value[0] === "'" ? value[0] : '';
  if (quote !== '' && value.length === 2) return match;
  return `${name}${equals}${quote}${REDACTED}${quote}`;
}

/**
 * The same inside a percent-encoded URL, a redirect or "next" parameter that carries a whole URL
 * (next=https%3A%2F%2Fapi.x%2Fv1%3Fapi_key%3D…): a name after an encoded (or plain) "?", "&", "#", ";" or "=",
 * an encoded "=", and a value running to the next encoded "&", "#" or ";". Encoded twice (%253D) too. A name
 * starts only at a delimiter and holds none, so each character is read by one attempt.
 */
const ENCODED_SECRET_PARAM =
  /(%(?:25)?(?:3[Ff]|26|23|3[Bb])|[?&#;=]|^)((?:[\w.-]|%(?:25)?5[BbDdFf])+)(%(?:25)?3[Dd])(?:[^\s&#;"'<>\\%]|%(?!(?:25)?(?:26|23|3[Bb])))+/g;
const ENCODED_EQUALS = /%(?:25)?3[Dd]/;

function redactEncodedParam(match: string, delimiter: string, name: string, equals: string): string {
  return isSecretName(percentDecoded(percentDecoded(name))) ? `${delimiter}${name}${equals}${REDACTED}` : match;
}

function percentDecoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

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
function redactSecretFields(text: string): string {
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
  if (!isSecretFieldName(name) || AUTHORIZATION_NAME.test(raw)) return undefined;
  const norm = normalizeKey(name);
  return norm.includes('cookie') || norm.endsWith('authorization');
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

/** scheme://user:password@host (and //user:password@host): the password goes, the user and host stay. */
const URL_PASSWORD = /(?<![A-Za-z0-9+.-])((?:[A-Za-z][A-Za-z0-9+.-]*:)?\/\/[^\s/?#@:"'<>\\]*:)[^\s/?#"'<>\\]+@/g;

/**
 * "Basic <base64 of user:password>" outside an Authorization header: "Basic" is also an English word,
 * so the credential must decode to printable "user:password".
 */
const BASIC = /(?:\b|(?<=\\[nrt]))(Basic)[ \t]+([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])/gi;
/** A replace with a function costs even when nothing matches; this test does not. */
const HAS_BASIC = /(?:\b|(?<=\\[nrt]))Basic[ \t]+[A-Za-z0-9+/]{4}/i;

function redactBasic(match: string, scheme: string, credential: string): string {
  return /^[\x20-\x7e]*:[\x20-\x7e]*$/.test(Buffer.from(credential, 'base64').toString('latin1')) ? `${scheme} ${REDACTED}` : match;
}

/**
 * An Authorization (or Proxy-Authorization, X-Authorization, HTTP_AUTHORIZATION) header written out
 * in text: a header dump, a curl command, JSON or code inside a string. Whatever the scheme (Basic,
 * Token, Digest, AWS4-HMAC-SHA256, none), the credentials after it are redacted; the scheme stays.
 * Captures the quote that opens the value, if any.
 */
const AUTHORIZATION = /(?<![A-Za-z0-9])authorization(?:\\?["'])?[ \t]*[:=][ \t]*(?:(\\?["'])[ \t]*)?/gi;
const AUTHORIZATION_NAME = /(?<![A-Za-z0-9])authorization$/i;
/** An auth scheme: letters (one trailing digit, as AWS4), then hyphenated parts, then blanks. Longer words are credentials. */
const AUTH_SCHEME = /[A-Za-z]{1,30}\d?(?:-[A-Za-z0-9]{1,20}){0,4}[ \t]+/y;
/**
 * auth-params (Digest username="x", Token token=abc) rather than a single token68: a name, "=", then a
 * token or a whole quoted string. Base64 padding before a closing quote (Basic dXNlcjpwYXNz=") is not one.
 */
const AUTH_PARAM = /[A-Za-z0-9!#$%*+.^_`|~-]+[ \t]*=[ \t]*(?:"[^"\r\n]*"|[A-Za-z0-9!#$%*+.^_`|~-])/y;
/** Where a token68 credential ends when the value is not quoted. */
const TOKEN_END = /[\s"'\\;&<>]/g;
const LINE_END = /[\r\n]/g;

function redactAuthorizationValues(text: string): string {
  let out = '';
  let cursor = 0;
  AUTHORIZATION.lastIndex = 0;
  for (let m = AUTHORIZATION.exec(text); m !== null; m = AUTHORIZATION.exec(text)) {
    let start = AUTHORIZATION.lastIndex;
    AUTH_SCHEME.lastIndex = start;
    if (AUTH_SCHEME.test(text) && isCredentialStart(text, AUTH_SCHEME.lastIndex)) start = AUTH_SCHEME.lastIndex;
    const end = credentialEnd(text, start, m[1]);
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
function closingQuote(text: string, start: number, quote: string): number {
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

function indexOf(pattern: RegExp, text: string, from: number): number {
  pattern.lastIndex = from;
  const m = pattern.exec(text);
  return m === null ? text.length : m.index;
}

/** Contact details: what output redaction adds for vendor results. */
export function redactContactsInText(text: string): string {
  let out = text.includes('@') ? text.replace(EMAIL, REDACTED) : text;
  if (/[A-Z]{2}\d{2}/.test(out)) out = out.replace(IBAN, redactIban);
  out = out.replace(PHONE, redactPhone);
  if (out.includes('00')) out = out.replace(PHONE_00, (match) => (isCountryCode(/^\d+/.exec(match.slice(2))![0]) ? redactPhone(match.slice(2)) : match));
  return out.replace(NANP_PHONE, REDACTED);
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

/** A phone shape with as many digits as a phone number has (E.164: at most 15, the country code included). */
function redactPhone(match: string): string {
  const digits = match.replace(/\D/g, '').length;
  return digits >= 8 && digits <= 15 ? REDACTED : match;
}

/**
 * The longest valid IBAN the match starts with, ending where a group ends: the pattern may have taken a group of
 * the text after it ("BE68 5390 0754 7034 2026 refund"). At most ten checks of 34 characters.
 */
function redactIban(match: string): string {
  for (let end = match.length; end >= 15; end = match.lastIndexOf(' ', end - 1)) {
    if (isIban(match.slice(0, end).replaceAll(' ', ''))) return REDACTED + match.slice(end);
  }
  return match;
}

export function isIban(compact: string): boolean {
  if (compact.length < 15 || compact.length > 34) return false;
  const check = Number(compact.slice(2, 4));
  if (check < 2 || check > 98) return false;
  // The country and check digits move to the end, letters become 10-35; the number mod 97 is 1.
  const rearranged = compact.slice(4) + compact.slice(0, 4);
  let rest = 0;
  for (const ch of rearranged) {
    const value = parseInt(ch, 36);
    rest = value > 9 ? (rest * 100 + value) % 97 : (rest * 10 + value) % 97;
  }
  return rest === 1;
}

interface DigitGroup {
  start: number;
  end: number;
  digits: string;
  /** separator before this group ('' for the first) */
  sep: string;
}

/**
 * Card numbers: 13-19 digits, contiguous or in the printed groupings (4-4-4-4[-3], Amex 4-6-5,
 * Diners 4-6-4), a card-issuer first digit (2-6) and a valid Luhn check digit. The grouping
 * rule is what keeps dash-joined ids such as Amazon's 3-7-7 order numbers out.
 */
export function redactCardNumbers(text: string): string {
  if (!/\d{4}/.test(text)) return text;
  return text.replace(DIGIT_RUN, (run: string, offset: number) => {
    // The id of a global object id (gid://shopify/Order/5927413514539) is an id whatever its digits; only the id:
    // digits after it ("…/Order/123 4111 1111 1111 1111") are judged as any others.
    if (offset > 8 && text[offset - 1] === '/' && GID_BEFORE.test(text.slice(Math.max(0, offset - 160), offset))) {
      const id = /^\d+/.exec(run)![0];
      return id + redactCardGroups(run.slice(id.length));
    }
    return redactCardGroups(run);
  });
}

/** The card numbers among a run of digit groups (see redactCardNumbers). */
function redactCardGroups(run: string): string {
  const groups = splitGroups(run);
  let out = '';
  let cursor = 0;
  for (let i = 0; i < groups.length; ) {
    const end = longestCardFrom(groups, i);
    if (end < 0) {
      i++;
      continue;
    }
    out += run.slice(cursor, groups[i]!.start) + REDACTED;
    cursor = groups[end]!.end;
    i = end + 1;
  }
  return out + run.slice(cursor);
}

/** What ends just before the id of a global object id: gid://<app>/<Type>/. */
const GID_BEFORE = /gid:\/\/[\w-]{1,64}\/[\w-]{1,64}\/$/;

/**
 * A card issuer's number: Luhn-valid, and a length the issuer of its first digits uses. 16 to 19 digits for the
 * 2-6 issuers (Mastercard, Visa, Discover, JCB, UnionPay, Maestro); 15 only Amex (34, 37) and JCB's old 2131;
 * 14 only Diners (30, 36, 38, 39); 13 only Visa's old numbers (4). Shopify's 13-digit order ids start with 5
 * or 6, and one in ten passes Luhn: those are ids, not cards.
 */
export function isCardNumber(digits: string): boolean {
  const n = digits.length;
  if (n < 13 || n > 19 || !/^[2-6]\d+$/.test(digits)) return false;
  if (n === 13 && digits[0] !== '4') return false;
  if (n === 14 && !/^3[0689]/.test(digits)) return false;
  if (n === 15 && !/^(?:3[47]|2131)/.test(digits)) return false;
  return luhnValid(digits);
}

export function luhnValid(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

function splitGroups(run: string): DigitGroup[] {
  const groups: DigitGroup[] = [];
  const re = /(^|[ \u00a0\u202f.-])(\d+)/g;
  for (let m = re.exec(run); m !== null; m = re.exec(run)) {
    const sep = m[1] ?? '';
    const digits = m[2] ?? '';
    groups.push({ start: m.index + sep.length, end: m.index + m[0].length, digits, sep });
  }
  return groups;
}

/** Index of the last group of the longest card starting at group i, or -1. */
function longestCardFrom(groups: readonly DigitGroup[], i: number): number {
  let best = -1;
  let digits = '';
  for (let j = i; j < groups.length; j++) {
    digits += groups[j]!.digits;
    if (digits.length > 19) break;
    if (j > i && groups[j]!.sep !== groups[i + 1]!.sep) break;
    if (isCardNumber(digits) && validLayout(groups.slice(i, j + 1).map((g) => g.digits.length))) best = j;
  }
  return best;
}

function validLayout(lengths: readonly number[]): boolean {
  if (lengths.length === 1) return true;
  const layout = lengths.join('-');
  if (layout === '4-6-5' || layout === '4-6-4') return true;
  const last = lengths[lengths.length - 1]!;
  return lengths.slice(0, -1).every((n) => n === 4) && last >= 1 && last <= 4;
}
