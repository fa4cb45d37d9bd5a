/**
 * Arrays whose items say what their neighbours are, so that an item is secret though nothing in it says so:
 * a flat header list (Node's req.rawHeaders: name, value, name, value, …), as a request-echo API proxied through
 * Nango sends back, a PEM private key split into an array of its lines, and a command line's argv (a container's
 * args) where a secret flag item is followed by its value item. The walker redacts the items named here
 * whole, before it looks at them one by one.
 */
import { carriesData } from './value-signals.js';
import { isSecretName } from './secret-keys.js';

/** An HTTP header name (RFC 9110 token characters), no longer than a real one gets. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
/**
 * Names that nearly every request or response carries. One of them among the even items is what tells a header
 * list from a list of words that happen to be tokens (["password", "reset", "email", "change"]).
 */
const COMMON_HEADERS = new Set([
  'host', 'content-type', 'content-length', 'user-agent', 'accept', 'accept-encoding', 'accept-language', 'authorization',
  'cookie', 'set-cookie', 'connection', 'cache-control', 'date', 'server', 'content-encoding', 'transfer-encoding',
  'origin', 'referer', 'x-forwarded-for', 'x-request-id', 'etag', 'location', 'vary', 'proxy-authorization',
]);
/** Each marker line of a PEM or PGP private key: what PRIVATE_KEY_BLOCK (token-shapes.ts) opens and closes a block with. */
const KEY_MARKER = /-----(BEGIN|END)[A-Z ]*PRIVATE KEY(?: BLOCK)?-----/g;

/**
 * The indexes, below `n`, of the items to redact whole; undefined (most arrays) when there are none. Linear in n:
 * each rule turns an array away at its first item that does not fit.
 */
export function secretItems(items: readonly unknown[], n: number): ReadonlySet<number> | undefined {
  const hidden = new Hidden();
  secretHeaderValues(items, n, hidden);
  privateKeyLines(items, n, hidden);
  flagValues(items, n, hidden);
  return hidden.indexes;
}

/** Made only once an item is found to hide: most arrays hide none, and cost no allocation. */
class Hidden {
  indexes: Set<number> | undefined;

  add(index: number): void {
    (this.indexes ??= new Set()).add(index);
  }
}

/**
 * ["Host", "api.x.com", "X-Api-Key", "…", …]: only an even length of at least two pairs whose every even item is a
 * header name, one of them a common one, is taken for a header list; then the value after a secret name (the rule
 * property names are judged by) is redacted, as {"X-Api-Key": "…"} would have it.
 */
function secretHeaderValues(items: readonly unknown[], n: number, hidden: Hidden): void {
  if (items.length < 4 || items.length % 2 !== 0 || !isHeaderName(items[0])) return;
  let common = false;
  for (let i = 0; i < n; i += 2) {
    const name = items[i];
    if (!isHeaderName(name)) return;
    common ||= COMMON_HEADERS.has(name.toLowerCase());
  }
  if (!common) return;
  for (let i = 0; i + 1 < n; i += 2) {
    if (isSecretName(items[i] as string) && carriesData(items[i + 1])) hidden.add(i + 1);
  }
}

function isHeaderName(item: unknown): item is string {
  return typeof item === 'string' && HEADER_NAME.test(item);
}

/**
 * ["-----BEGIN RSA PRIVATE KEY-----", "MIIEow…", …, "-----END RSA PRIVATE KEY-----"]: every item from the one that
 * opens a block through the one that closes it, or to the end of the array when none does (as PRIVATE_KEY_BLOCK does
 * with text). A block opened and closed within one item is left to the text rules.
 */
function privateKeyLines(items: readonly unknown[], n: number, hidden: Hidden): void {
  let open = false;
  for (let i = 0; i < n; i++) {
    const item = items[i];
    // Most strings hold no marker: one native search turns them away.
    const last = typeof item === 'string' && item.includes('PRIVATE KEY') ? lastKeyMarker(item) : undefined;
    if (open || last === 'BEGIN') hidden.add(i);
    if (last !== undefined) open = last === 'BEGIN';
  }
}

/** Whether the last key marker in the text opens a block or closes one; undefined when it has none. */
function lastKeyMarker(text: string): 'BEGIN' | 'END' | undefined {
  let last: 'BEGIN' | 'END' | undefined;
  for (const match of text.matchAll(KEY_MARKER)) last = match[1] as 'BEGIN' | 'END';
  return last;
}

/** A long flag item of an argv list ("--db-password"); its value is the next item. */
const LONG_FLAG = /^--[A-Za-z][\w.-]{0,127}$/;
/** An item that is itself a flag (--stdin, -v): no value of the flag before it. */
const ANY_FLAG = /^--?[A-Za-z]/;

/**
 * ["mysql", "--password", "…", "-h", "db"], a Kubernetes or ECS container's args ["--db-password", "…", "--verbose"]:
 * the item after a flag item that names a secret (as a parameter name is judged), unless that item is a flag itself.
 * "--password=…" in one item is the text rules' (redactSecretParams).
 */
function flagValues(items: readonly unknown[], n: number, hidden: Hidden): void {
  for (let i = 0; i + 1 < n; i++) {
    const item = items[i];
    // Most items are no flag: one native check turns them away.
    if (typeof item !== 'string' || !item.startsWith('--') || !LONG_FLAG.test(item) || !isSecretName(item)) continue;
    const value = items[i + 1];
    if (carriesData(value) && !(typeof value === 'string' && ANY_FLAG.test(value))) hidden.add(i + 1);
  }
}
