import { AUTHORIZATION_NAME } from './credentials-in-text.js';
import { REDACTED } from './markers.js';
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
 */
export const SECRET_PARAM = new RegExp(
  String.raw`(?<![\w.%[\]-])([\w.%[\]-]+)([${BLANK_CHARS}]*=[${BLANK_CHARS}]*)(?:"[^"\r\n]*"|'[^'\r\n]*'|[^\s&#;"'<>\\=][^\s&#;"'<>\\]*)`,
  'g',
);

/**
 * Also the assignments of config files and code: api_key="…", password = hunter2, SECRET='…' (the quotes stay,
 * the value goes). An empty quoted value has nothing to hide.
 */
export function redactParam(match: string, name: string, equals: string): string {
  // authorization=… was handled by redactAuthorizationValues, which keeps the scheme.
  if (AUTHORIZATION_NAME.test(name)) return match;
  if (!isSecretParamName(name.includes('%') ? percentDecode(name) : name)) return match;
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
