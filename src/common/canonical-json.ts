import { createHash, createHmac } from 'node:crypto';

/**
 * Deterministic JSON: the same value always gives the same text, whatever the
 * order its object keys were written in. Action digests (idempotency, approval
 * binding) and the ledger hash chain depend on it, so it refuses anything whose
 * text would be ambiguous or lossy instead of guessing.
 */
export class CanonicalJsonError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CanonicalJsonError';
  }
}

/**
 * The deepest nesting of arrays and objects canonicalJson writes, the outermost counting 1 (as jsonDepth counts
 * brackets). The writer recurses a level at a time, so a value nested a few thousand deep ran out of stack: a
 * RangeError, not a CanonicalJsonError, which the ledger did not take for "no canonical form" (eventHashOrNull), so
 * one such event (jsonb takes thousands of levels; a plain INSERT around the gateway) failed every sealing pass of
 * every org and made its org's verify a 500. Nothing the gateway hashes comes near: request bodies stop at
 * MAX_JSON_DEPTH (32; 34 for a batch's envelope), and an action's {toolName, action, params}, a credentials
 * fingerprint's [binding, config], an event's hashed fields around its metadata add a level or two to what came in
 * (vendor answers, up to 64 deep, are never hashed: a result is digested as stored text). 64 leaves twice that room
 * and is far inside the stack. Deeper is refused like any other value with no canonical form.
 */
export const MAX_CANONICAL_DEPTH = 64;

export function canonicalJson(value: unknown): string {
  if (value === undefined) throw new CanonicalJsonError('undefined has no JSON form');
  return write(value, new Set<object>(), 0);
}

/**
 * Whether `value` (as JSON.parse or pg hand it over: plain objects, arrays and scalars) nests arrays and objects
 * deeper than `levels`. Recursive, but it turns back as soon as it passes `levels`, so the stack it takes is bounded
 * by `levels`, not by the value. For callers that must show or skip such a value rather than fail on it, as
 * JSON.stringify does (a RangeError) some thousands of levels down.
 */
export function nestedDeeperThan(value: unknown, levels: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (levels < 1) return true;
  const members: unknown[] = Array.isArray(value) ? value : Object.values(value);
  return members.some((member) => nestedDeeperThan(member, levels - 1));
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

export interface ActionIdentity {
  toolName: string;
  action: string;
  params: unknown;
}

/** The bytes every action digest is taken over: exactly {toolName, action, params}, extra fields on the argument left out. */
const actionText = ({ toolName, action, params }: ActionIdentity): string => canonicalJson({ toolName, action, params });

/**
 * The action digest (idempotency, approval binding, policy decisions, ledger events): HMAC-SHA256, under the org's
 * digest key (orgs.digest_key, 32 random bytes that never change, not even when the master key rotates), of the
 * canonical {toolName, action, params}; 64 hex. Keyed because it is shown beside the redacted input (GET
 * /v1/tool-calls/:id, the approval view, ledger events and their exports): a plain hash of it would confirm
 * offline guesses of a low-entropy redacted value (a PIN, an SSN, a card number), as an unkeyed credential
 * fingerprint would (EnvelopeCipher.fingerprint). Per org: the same call in two orgs has two digests.
 */
export function actionDigest(identity: ActionIdentity, key: Uint8Array): string {
  if (key.byteLength < 32) throw new Error('an action digest key is 32 bytes or more');
  return createHmac('sha256', key).update(actionText(identity), 'utf8').digest('hex');
}

/**
 * The unkeyed SHA-256 digest calls were recorded under before digests were keyed. Only ever compared with a stored
 * digest (a resend of a call recorded before the upgrade is still the same call): never stored nor shown again.
 */
export function unkeyedActionDigest(identity: ActionIdentity): string {
  return sha256Hex(actionText(identity));
}

/** `depth`: how many arrays and objects (and toJSON hops) enclose `value`. */
function write(value: unknown, ancestors: Set<object>, depth: number): string {
  switch (typeof value) {
    case 'string':
      // JSON.stringify escapes lone surrogates (well-formed JSON.stringify), so the text is always valid UTF-8.
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new CanonicalJsonError(`non-finite number ${String(value)}`);
      // -0 and 0 are the same JSON number.
      return Object.is(value, -0) ? '0' : JSON.stringify(value);
    case 'object':
      return value === null ? 'null' : writeObject(value, ancestors, depth);
    case 'bigint':
      throw new CanonicalJsonError('bigint has no canonical JSON form');
    default:
      throw new CanonicalJsonError(`${typeof value} has no JSON form`);
  }
}

function writeObject(value: object, ancestors: Set<object>, depth: number): string {
  if (ancestors.has(value)) throw new CanonicalJsonError('cyclic structure');
  // A toJSON hop counts as a level too (a Date is one, as the object it is): a toJSON that hands back a new object
  // with a toJSON of its own each time ends here rather than on the stack.
  if (depth >= MAX_CANONICAL_DEPTH) throw new CanonicalJsonError(`nested deeper than ${MAX_CANONICAL_DEPTH} levels of arrays and objects`);
  const proto: unknown = Object.getPrototypeOf(value);
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    // Dates and the like serialise as JSON would; any other class instance (Map, Set, Buffer...) has no
    // faithful JSON form and would silently collapse to {} and collide with other values.
    if (typeof toJSON !== 'function') throw new CanonicalJsonError('only plain objects and arrays are allowed');
    ancestors.add(value);
    try {
      const json: unknown = (toJSON as () => unknown).call(value);
      if (json === undefined) throw new CanonicalJsonError('toJSON returned undefined');
      return write(json, ancestors, depth + 1);
    } finally {
      ancestors.delete(value);
    }
  }
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      // undefined array slots become null, as JSON.stringify does, so a value and its JSON round trip share a digest.
      return `[${value.map((item: unknown) => (item === undefined ? 'null' : write(item, ancestors, depth + 1))).join(',')}]`;
    }
    const parts: string[] = [];
    // Default sort compares UTF-16 code units: locale-independent and stable across runtimes.
    for (const key of Object.keys(value).sort()) {
      const member: unknown = (value as Record<string, unknown>)[key];
      if (member === undefined) continue;
      parts.push(`${JSON.stringify(key)}:${write(member, ancestors, depth + 1)}`);
    }
    return `{${parts.join(',')}}`;
  } finally {
    ancestors.delete(value);
  }
}
