import { AUTHORIZATION_NAME } from './credentials-in-text.js';
import { REDACTED } from './markers.js';
import { closesQuotedKey } from './secret-fields.js';
import { isSecretFieldName, isSecretName } from './secret-keys.js';
import { percentDecode } from './percent-decode.js';
import { BLANK_CHARS } from './unicode-forms.js';

/**
 * <password>…</password>, <ApiKey>…</ApiKey>, <ns:ClientSecret a="b">…</ns:ClientSecret>: an element named like a secret
 * (the name without its namespace prefix, judged as a property name), whose text content goes. Each "<" starts at most
 * one attempt, which reads no further than the next "<": the pass stays linear.
 */
export const XML_ELEMENT = /<([A-Za-z_][\w.:-]{0,127})((?:\s[^<>]*)?>)([^<]*)<\/\1\s*>/g;

export function redactXmlElement(match: string, name: string, rest: string, content: string): string {
  const local = name.slice(name.lastIndexOf(':') + 1);
  if (content.trim() === '' || !isSecretFieldName(local)) return match;
  return `<${name}${rest}${REDACTED}</${name}>`;
}

/**
 * name=value with a secret-like name (access_token, client_secret, X-Api-Key, auth[token]) in a URL,
 * a bare query string, a path or prose; the name is judged as a property name would be. A name starts
 * only where a run of name characters starts, so each run is tried once; a value never starts with "="
 * ("token==null" is code, not a parameter). Blanks around "=" are any within a line (api_key\u00a0=\u00a0…).
 *
 * Only the name and its "=" are matched here: the value is read after them (PARAM_VALUE) and only for a secret name.
 * Read as part of every match, a harmless name's value (which may hold "?", "=" and ",") hid what followed inside
 * it from the scan: "callback=https://hooks.x/y?token=…", "url=/v1/items?api_key=…", "a=1,password=…" and
 * "user= password=…" kept their secrets. Each character is read once by this pattern and at most once by PARAM_VALUE.
 */
const SECRET_PARAM_NAME = new RegExp(String.raw`(?<![\w.%[\]-])([\w.%[\]-]+)([${BLANK_CHARS}]*=[${BLANK_CHARS}]*)`, 'g');
/** A parameter's value, from where it starts: quoted (the quotes stay), or up to a blank or a delimiter. */
const PARAM_VALUE = /"[^"\r\n]*"|'[^'\r\n]*'|[^\s&#;"'<>\\=][^\s&#;"'<>\\]*/y;

/**
 * Every secret-named parameter's value in `text` replaced by the marker. Also the assignments of config files and
 * code: api_key="…", password = hunter2, SECRET='…' (the quotes stay, the value goes). An empty quoted value has
 * nothing to hide.
 */
export function redactSecretParams(text: string): string {
  let out = '';
  let copied = 0;
  SECRET_PARAM_NAME.lastIndex = 0;
  for (let m = SECRET_PARAM_NAME.exec(text); m !== null; m = SECRET_PARAM_NAME.exec(text)) {
    const [whole, name] = m;
    // authorization=… was handled by redactAuthorizationValues, which keeps the scheme.
    if (AUTHORIZATION_NAME.test(name) || !isSecretParamName(name.includes('%') ? percentDecode(name) : name)) continue;
    const valueAt = m.index + whole.length;
    // {"api_key=": "…"}: this "=" is the key's own, and redactSecretFields took the value after the key's ":".
    if (whole.length === name.length + 1 && closesQuotedKey(text, valueAt)) continue;
    PARAM_VALUE.lastIndex = valueAt;
    const value = PARAM_VALUE.exec(text)?.[0];
    if (value === undefined) continue;
    const quote = value[0] === '"' || value[0] === "'" ? value[0] : '';
    if (quote !== '' && value.length === 2) continue;
    out += `${text.slice(copied, valueAt)}${quote}${REDACTED}${quote}`;
    copied = valueAt + value.length;
    SECRET_PARAM_NAME.lastIndex = copied;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/**
 * The same inside a percent-encoded URL, a redirect or "next" parameter that carries a whole URL
 * (next=https%3A%2F%2Fapi.x%2Fv1%3Fapi_key%3D…): a name after an encoded (or plain) "?", "&", "#", ";" or "=",
 * an encoded "=", and a value running to the next encoded "&", "#" or ";". Encoded twice (%253D) too. A name
 * starts only at a delimiter and holds none, so each character is read by one attempt.
 */
export const ENCODED_SECRET_PARAM =
  /(%(?:25)?(?:3[Ff]|26|23|3[Bb])|[?&#;=]|^)((?:[\w.-]|%(?:25)?5[BbDdFf])+)(%(?:25)?3[Dd])(?:[^\s&#;"'<>\\%]|%(?!(?:25)?(?:26|23|3[Bb])))+/g;
export const ENCODED_EQUALS = /%(?:25)?3[Dd]/;

export function redactEncodedParam(match: string, delimiter: string, name: string, equals: string): string {
  return isSecretParamName(percentDecode(percentDecode(name))) ? `${delimiter}${name}${equals}${REDACTED}` : match;
}

/**
 * A parameter name that names a secret: as a property name would, or plain "Signature", the signature of a signed URL
 * that anyone holding can fetch with until it expires: CloudFront (Expires, Signature, Key-Pair-Id), S3 SigV2 presigned
 * (AWSAccessKeyId, Expires, Signature), GCS V2 (GoogleAccessId, Expires, Signature). Only as a parameter: as a property
 * name "signature" is no secret (signature_confirmation, signatureRequired are delivery options), and only the exact
 * name, so those stay here too. A "signature=true" flag is lost with it, a cost that leaks nothing.
 */
function isSecretParamName(name: string): boolean {
  return isSecretName(name) || name.toLowerCase() === 'signature';
}
