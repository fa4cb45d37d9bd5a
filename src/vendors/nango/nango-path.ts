/**
 * Safety checks for `nango_proxy` params, done before anything is sent. The
 * path comes from a model, which may be steered by prompt injection, and Nango
 * appends it to the provider's base URL with the org's credentials attached:
 * a path that escapes its prefix (dot segments in any encoding), names another
 * host (scheme, `//host`, `@`, backslash), smuggles headers (CR/LF) or that
 * Nango reads as a query, fragment or template (`?`, `#`, `${...}`) would turn
 * the proxy into a credentialed request to wherever the model likes, or put
 * the credentials themselves in the request.
 * Checks run on the raw text AND on its decoded (and NFKC-normalised) form,
 * because upstream servers decode again; double encoding is refused outright.
 */
import { plainDecimalText } from '../../policy/policy-decimal.js';
import { hasLoneSurrogate } from '../../common/lone-surrogate.js';

/**
 * The longest path, in characters (code points, as JSON Schema counts them), not counting its optional
 * leading "/": "v1/x" and "/v1/x" are one path. The gateway adds the "/" (canonicalNangoPath) before the
 * tool definition's schema is checked, so a limit counted with it would refuse a relative path of exactly
 * this length that the caller was told is allowed; both spellings get the same limit instead.
 */
export const NANGO_PATH_MAX = 2048;
/** The same limit on the canonical path (always with its leading "/"): the definition's maxLength. */
export const NANGO_CANONICAL_PATH_MAX = NANGO_PATH_MAX + 1;
export const QUERY_MAX_KEYS = 100;
export const QUERY_VALUE_MAX = 2048;
export const QUERY_NAME_MAX = 256;
/**
 * The longest request target (`/proxy/{path}?{query}`, percent-encoded as sent) a call may make: Nango is a Node
 * server, whose request line and headers together may not pass 16 KiB (431 otherwise), and providers and balancers
 * behind it commonly refuse URLs past 8 KiB. A query within the per-value limits can pass it: a non-ASCII character
 * goes as 6 to 12 characters of percent-encoding.
 */
export const NANGO_TARGET_MAX = 8192;

// RFC 3986 pchar minus "@", plus "/" and "%": everything else must be percent-encoded.
// (";" passes here but is refused in every form by checkForm, which reads the decoded path.)
const ALLOWED_RAW = /^[A-Za-z0-9\-._~!$&'()*+,;=:/%]*$/;
const ENCODED_UNRESERVED = /%(?:3[0-9]|4[1-9a-f]|5[0-9a]|6[1-9a-f]|7[0-9a]|2[de]|5f|7e)/i;
// The other characters a segment may hold as themselves: sub-delims but ";" (refused), and ":".
// "@" (refused in every form) and "%" (%25, double encoding) have their own checks.
const ENCODED_SUB_DELIM = /%(?:2[146789abc]|3[ad])/i;
const ENCODED_SLASH = /%2f/i;
const BAD_PERCENT = /%(?![0-9A-Fa-f]{2})/;
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;
// CR/LF/NUL and friends: header injection and truncation tricks.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Names of Nango control headers and of the base-URL override, compared
 * without case, "-" or "_" (Base-Url-Override = baseUrlOverride = base_url_override).
 */
const RESERVED = new Set(['baseurloverride', 'connectionid', 'providerconfigkey', 'retries', 'retryon', 'authorization', 'decompress', 'forwardheadersonredirect']);

export function isReservedKey(key: string): boolean {
  const k = key.toLowerCase().replace(/[-_\s]/g, '');
  return RESERVED.has(k) || k.startsWith('nango');
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Checks that hold for the raw path and for every decoded form of it. Some Nango releases take the path
 * from Express's already-decoded `req.params[0]` and build `${path}?${query}` from it, so the decoded form
 * is what they send: there "?" starts a query (past checkNangoQuery), "#" a fragment (cut off: "/users%23"
 * reaches "/users", around a rule on it), and buildProxyURL runs interpolateIfNeeded over base URL + path
 * with the connection's credentials: "${access_token}" becomes the secret, and once the provider's base URL
 * is a template (`${connectionConfig.subdomain}`) everything after "||" is dropped.
 */
function checkForm(p: string): string | null {
  if (p.includes('?')) return 'path: put query parameters in `query`, not in the path (neither ? nor %3F)';
  if (p.includes('#')) return 'path: fragments (# or %23) are not allowed';
  if (p.includes('{') || p.includes('}')) return "path: '{' and '}' (or %7B, %7D) are not allowed: Nango reads ${...} in a path as a template";
  if (p.includes('||')) return "path: '||' (or %7C%7C) is not allowed: Nango cuts a templated URL there";
  if (CONTROL.test(p)) return 'path: control characters (CR, LF, NUL, ...) are not allowed';
  if (p.includes('\\')) return 'path: backslashes are not allowed';
  if (p.includes('@')) return "path: '@' is not allowed";
  const rel = p.startsWith('/') ? p.slice(1) : p;
  if (rel.startsWith('/')) return 'path: scheme-relative URLs (//host) are not allowed';
  if (SCHEME.test(rel)) return 'path: absolute URLs are not allowed; give a path relative to the provider';
  for (const segment of rel.split('/')) {
    // "..;" and ".. " are dot segments to some servers (Tomcat path parameters, trimming).
    const bare = segment.split(';')[0].trim();
    if (bare === '.' || bare === '..') return "path: '.' and '..' segments are not allowed";
  }
  if (rel.includes('//')) return 'path: empty path segments are not allowed';
  // Matrix parameters: Java servers (Tomcat, Spring, Jetty) read /users;x=1 as /users, so a rule on
  // "/users" would not see it; other servers read it as another resource. Either way: not one spelling.
  if (p.includes(';')) return "path: ';' (path parameters) is not allowed";
  return null;
}

/** Counted in characters (code points), as the tool definition's JSON Schema counts them: an emoji is one, not two. */
function longerThan(text: string, max: number): boolean {
  if (text.length <= max) return false;
  let n = 0;
  for (const _ of text) if (++n > max) return true;
  return false;
}

/** Returns a message naming the field, or null when the path is safe to proxy. */
export function checkNangoPath(path: unknown): string | null {
  if (typeof path !== 'string') return 'path: must be a string';
  if (longerThan(proxyRelativePath(path), NANGO_PATH_MAX)) return `path: longer than ${NANGO_PATH_MAX} characters (not counting a leading '/')`;
  if (path === '' || path === '/') return 'path: must not be empty';
  const raw = checkForm(path);
  if (raw) return raw;
  if (!ALLOWED_RAW.test(path)) return 'path: contains characters that must be percent-encoded';
  if (BAD_PERCENT.test(path)) return "path: '%' must be followed by two hex digits";
  if (/%25/i.test(path)) return 'path: double percent-encoding is not allowed';
  // One spelling of each path, so a policy rule on a path holds (policy eq/in compare the text).
  // Letters, digits and -._~ mean the same encoded or not (RFC 3986 §2.3).
  if (ENCODED_UNRESERVED.test(path)) return 'path: write letters, digits and -._~ as themselves, not percent-encoded';
  // RFC 3986 §2.2 keeps "abc%3AbatchUpdate" apart from "abc:batchUpdate", but nearly every server decodes
  // the segment before routing and reads them alike; whoever needs the character writes it as itself.
  if (ENCODED_SUB_DELIM.test(path)) return "path: write !$&'()*+,=: as themselves, not percent-encoded";
  // Servers differ on %2F: some decode it into a separator before routing (/admin%2Fusers is /admin/users
  // to them), others keep it in the segment. Refused, as the one sure way a rule on "/admin/users" holds.
  if (ENCODED_SLASH.test(path)) return "path: an encoded '/' (%2F) is not allowed";
  // A trailing "/" stays: it is another resource to some providers (Django REST APIs need it) and the same to
  // others, so it is sent as given, and policy rules compare the path ignoring it (the action's pathParams).
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    return 'path: percent-encoding does not decode to UTF-8';
  }
  const folded = decoded.normalize('NFKC');
  const unsafe = checkForm(decoded) ?? checkForm(folded);
  if (unsafe) return unsafe;
  // The same one-spelling rule for look-alikes: a server that folds "／" (U+FF0F) or "ａ" (U+FF41) as NFKC does
  // reads "/v1/admin／users" as "/v1/admin/users", which a rule on that path would not see.
  if (decoded !== folded) return 'path: write characters as their plain form (the one Unicode NFKC normalisation gives), not as fullwidth, compatibility or decomposed look-alikes';
  return null;
}

/**
 * The one spelling of a path checkNangoPath accepted: with its leading "/" (the proxy URL drops it) and
 * percent-encodings in upper-case hex (%c3%a9 and %C3%A9 are the same octets, RFC 3986 §6.2.2.1).
 */
export function canonicalNangoPath(path: string): string {
  const upper = path.replace(/%[0-9a-f]{2}/gi, (triplet) => triplet.toUpperCase());
  return upper.startsWith('/') ? upper : `/${upper}`;
}

/** The path as appended after `/proxy/` (one leading "/" is accepted and dropped). */
export function proxyRelativePath(path: string): string {
  return path.startsWith('/') ? path.slice(1) : path;
}

export function checkNangoQuery(query: unknown): string | null {
  if (query === undefined) return null;
  if (!isObject(query)) return 'query: must be an object';
  const entries = Object.entries(query);
  if (entries.length > QUERY_MAX_KEYS) return `query: at most ${QUERY_MAX_KEYS} parameters`;
  for (const [key, value] of entries) {
    if (key === '' || longerThan(key, QUERY_NAME_MAX) || CONTROL.test(key) || hasLoneSurrogate(key)) return `query: parameter names must be 1-${QUERY_NAME_MAX} printable characters`;
    // Whole (at most 256): the catalog redacts the name and only then cuts it; a name cut here
    // first could keep most of a card number or token that redaction no longer recognises.
    const name = `query.${key}`;
    if (isReservedKey(key)) return `${name}: may not set Nango control headers or a base URL override`;
    if (typeof value === 'string') {
      if (longerThan(value, QUERY_VALUE_MAX)) return `${name}: longer than ${QUERY_VALUE_MAX} characters`;
      // URLSearchParams would send U+FFFD for it: another text than the one the digest, the policy and an approver saw.
      if (hasLoneSurrogate(value)) return `${name}: must be well-formed text (a lone UTF-16 surrogate has no URL form)`;
    } else if (!(typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value)))) {
      return `${name}: must be a string, a finite number or a boolean`;
    }
  }
  return null;
}

const ALLOWED_PARAMS: Record<string, readonly string[]> = { get: ['path', 'query'], post: ['path', 'body'] };

/** All of `nango_proxy`'s extra checks for one action's params. */
export function checkNangoParams(action: string, params: Record<string, unknown>): string | null {
  const allowed = ALLOWED_PARAMS[action];
  if (!allowed) return 'action: nango_proxy has no such action';
  for (const key of Object.keys(params)) {
    if (isReservedKey(key)) return `${key.slice(0, 256)}: may not set Nango control headers or a base URL override`;
    if (!allowed.includes(key)) return `${key.slice(0, 256)}: unknown parameter`;
  }
  const path = checkNangoPath(params.path);
  if (path) return path;
  if (action === 'get') return checkNangoQuery(params.query) ?? checkTargetLength(params.path as string, params.query as Record<string, unknown> | undefined);
  return isObject(params.body) ? null : 'body: must be an object';
}

/** A path and query within their own limits whose request target, encoded, is past NANGO_TARGET_MAX. */
function checkTargetLength(path: string, query: Record<string, unknown> | undefined): string | null {
  if (query === undefined) return null;
  const built = buildNangoProxyUrl('http://nango.invalid', path, query);
  if (built === null) return null; // refused when the call is sent, as before (checkNangoPath already passed it)
  const target = built.length - 'http://nango.invalid'.length;
  if (target <= NANGO_TARGET_MAX) return null;
  return `query: the request URL would be ${target} characters once percent-encoded (path and query), over the ${NANGO_TARGET_MAX} Nango and the providers behind it take; send fewer or shorter values (a non-ASCII character takes 6 to 12)`;
}

/**
 * `{nangoHost}/proxy/{path}?{query}`, or null when the parsed URL is not exactly
 * that (another origin, or a path the URL parser rewrote, e.g. resolved dot segments).
 */
export function buildNangoProxyUrl(nangoHost: string, path: string, query?: Record<string, unknown>): string | null {
  let host: URL;
  try {
    host = new URL(nangoHost);
  } catch {
    return null;
  }
  const prefix = `${host.pathname.replace(/\/+$/, '')}/proxy/`;
  const expectedPath = `${prefix}${proxyRelativePath(path)}`;
  let url: URL;
  try {
    url = new URL(`${host.origin}${expectedPath}`);
  } catch {
    return null;
  }
  if (url.origin !== host.origin || url.pathname !== expectedPath || url.username !== '' || url.password !== '') return null;
  // A number goes as the decimal text the policy compared, never in exponent form.
  for (const [k, v] of Object.entries(query ?? {})) url.searchParams.append(k, typeof v === 'number' ? plainDecimalText(v) : String(v));
  return url.toString();
}
