import { define, RecordedNames } from './jsonb-copy.js';
import { REDACTED } from './markers.js';

/**
 * The org's own credentials, by value, in what a vendor answered. A vendor that echoes what it was sent (a debug
 * field, an error quoting the request, a hostile or compromised endpoint) hands back the credential the gateway
 * authenticated with, and one of no known shape (a Nango secret key is a UUID, a Jumio client secret any string) passes
 * the shape redaction: it went to the ledger (output_redacted, exports), the encrypted result and the agent. The
 * executor holds the decrypted config during the call, so it redacts by value what the call's answer carries
 * (RuntimeToolExecutor: the result, and the error text of a failure).
 *
 * Fields of a config (CREDENTIAL_SCHEMAS, src/credentials) that name something rather than prove who is calling:
 * answers name them as a matter of course (the shop's domain, the KYX account an execution belongs to, the Nango
 * connection and integration, the marketplace), and none lets anyone call the vendor. A client id is half of a pair
 * whose secret is the other half (Shopify shows its app's in install links). Every other string field is a secret,
 * so a field added to a schema later is redacted until it is named here.
 */
const NOT_SECRET = new Set(['shopDomain', 'apiVersion', 'region', 'marketplaceId', 'accountId', 'connectionId', 'providerConfigKey', 'clientId']);

/**
 * Shorter values are not searched for: the schemas accept an 8-character Shopify or Nango secret (Amazon and Jumio
 * any length), and a shorter one would hide ordinary words of every answer. Real ones are far longer (a Nango key is
 * 36 characters, a Shopify token 38).
 */
export const CREDENTIAL_VALUE_MIN_LENGTH = 8;

/** Values deeper than this are left as they are: vendor JSON is refused past 64 levels (MAX_VENDOR_JSON_DEPTH), and a cycle ends here. */
const MAX_DEPTH = 256;

/**
 * The forms of the config's secrets an answer may carry, each at least CREDENTIAL_VALUE_MIN_LENGTH long: as written,
 * percent-encoded (a URL or query string echoed), form-encoded (a token request's body: space as "+"), JSON-escaped
 * (a request body quoted inside a string), and a client id and secret as the base64 of an HTTP Basic header (Jumio's
 * token request), which the shape redaction only knows after "Basic". `tokens`: the access tokens the call was sent
 * with that the config does not hold (bought from a vendor's token endpoint: VendorCallContext.tokensUsed), in the
 * same forms. Empty when there is nothing to look for.
 */
export function credentialSecretForms(config: Readonly<Record<string, unknown>> | null | undefined, tokens: Iterable<string> = []): string[] {
  const forms = new Set<string>();
  const add = (value: string): void => {
    if (value.length < CREDENTIAL_VALUE_MIN_LENGTH) return;
    forms.add(value);
    forms.add(encodeURIComponent(value));
    forms.add(new URLSearchParams({ v: value }).toString().slice(2));
    forms.add(JSON.stringify(value).slice(1, -1));
  };
  for (const token of tokens) add(token);
  for (const [field, value] of Object.entries(config ?? {})) {
    if (typeof value === 'string' && !NOT_SECRET.has(field)) add(value);
  }
  const { clientId, clientSecret } = config ?? {};
  if (typeof clientId === 'string' && typeof clientSecret === 'string' && clientSecret.length >= CREDENTIAL_VALUE_MIN_LENGTH) {
    forms.add(Buffer.from(`${clientId}:${clientSecret}`, 'utf8').toString('base64'));
  }
  // The longest first: a form that holds another (a value and its encoding) is replaced whole, not in part.
  return [...forms].filter((f) => f.length >= CREDENTIAL_VALUE_MIN_LENGTH).sort((a, b) => b.length - a.length);
}

/** The text with each form replaced by [REDACTED]: one native search per form, nothing built when none is there. */
export function redactCredentialValuesInText(text: string, forms: readonly string[]): string {
  let out = text;
  for (const form of forms) if (out.includes(form)) out = out.replaceAll(form, REDACTED);
  return out;
}

/**
 * The value with every form (credentialSecretForms) in its strings and object keys replaced by [REDACTED]. Only what
 * holds one is copied: an answer without any is handed back as it is (the same object), for a few native searches
 * per string. Arrays and plain objects are walked (a parsed answer has no other); anything else is kept as it is.
 */
export function redactCredentialValues<T>(value: T, forms: readonly string[]): T {
  if (forms.length === 0) return value;
  return walk(value, forms, 0) as T;
}

function walk(value: unknown, forms: readonly string[], depth: number): unknown {
  if (typeof value === 'string') return redactCredentialValuesInText(value, forms);
  if (value === null || typeof value !== 'object' || depth >= MAX_DEPTH) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const out = walk(item, forms, depth + 1);
      if (out !== item && !copy) copy = value.slice();
      if (copy) copy[i] = out;
    }
    return copy ?? value;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  const keys = Object.keys(value);
  const source = value as Record<string, unknown>;
  let copy: Record<string, unknown> | undefined;
  let names: RecordedNames | undefined;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i];
    const item = source[key];
    const outKey = redactCredentialValuesInText(key, forms);
    const out = walk(item, forms, depth + 1);
    if (!copy && (outKey !== key || out !== item)) {
      copy = {};
      names = new RecordedNames(keys, copy);
      for (let j = 0; j < i; j++) define(copy, keys[j], source[keys[j]]);
    }
    // A redacted name never takes another member's (RecordedNames); "__proto__" stays a member (define).
    if (copy) define(copy, names!.of(key, outKey), out);
  }
  return copy ?? value;
}
