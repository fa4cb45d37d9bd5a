import { compareDecimals, parseDecimal } from './policy-decimal.js';

/** A condition the engine cannot decide. The rule that holds it blocks: fail closed, never fail open. */
export class Unevaluable extends Error {}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** How eq, ne and in compare a param with a rule's value, beyond JSON equality (PolicyEvaluationInput). */
export interface ParamKinds {
  decimals: readonly string[];
  paths: readonly string[];
  texts: readonly string[];
  canonical: (param: string, value: unknown) => unknown;
}

/**
 * Whether a param equals a rule's value, for eq, ne and in. The value of a top-level param is first put in the
 * spelling the call's params were rewritten into (the admin's "v1/x" is the call's "/v1/x"). Then a declared
 * decimal param equals the same amount however either is written; a declared URL path equals a value that
 * differs only by a trailing "/"; within a param sent as text, the same text is equal too (false, "false").
 */
export function equalityAt(path: string, kinds: ParamKinds): (param: unknown, ruleValue: unknown) => boolean {
  const topLevel = !path.includes('.');
  const byValue = kinds.decimals.includes(path);
  const byPath = kinds.paths.includes(path);
  const byText = kinds.texts.includes(path.split('.')[0]);
  return (param, ruleValue) => {
    const value = topLevel ? kinds.canonical(path, ruleValue) : ruleValue;
    return (
      (byValue ? sameDecimal(param, value) : null) ??
      (byPath ? samePath(param, value) : null) ??
      (byText ? sameText(param, value) : jsonEqualDeep(param, value))
    );
  };
}

/** Whether two URL paths are the same but for one trailing "/" ("/v1/users/" and "/v1/users"); null unless both are strings. */
function samePath(a: unknown, b: unknown): boolean | null {
  if (typeof a !== 'string' || typeof b !== 'string') return null;
  const bare = (p: string): string => (p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p);
  return bare(a) === bare(b);
}

/**
 * Whether two values are sent as the same text: every scalar as String(v), so false and "false" are one
 * ?dryRun=false, and the number 12 is "12". Two texts of one number spelt otherwise ("12" and "0012", "100" and
 * "100.00") may be one value to the vendor or two: the rule cannot be evaluated (see jsonEqualDeep).
 */
function sameText(a: unknown, b: unknown): boolean {
  return jsonEqualDeep(asText(a), asText(b), 0, true);
}

function asText(value: unknown, depth = 0): unknown {
  if (depth > 64) throw new Unevaluable('value nested too deeply');
  if (typeof value === 'boolean' || typeof value === 'number') return String(value);
  if (Array.isArray(value)) return value.map((item: unknown) => asText(item, depth + 1));
  if (isRecord(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, asText(v, depth + 1)]));
  return value;
}

/** Whether two values are the same decimal amount; null when either is not a decimal (then they compare as JSON). */
function sameDecimal(a: unknown, b: unknown): boolean | null {
  const left = parseDecimal(a);
  const right = parseDecimal(b);
  return left === null || right === null ? null : compareDecimals(left, right) === 0;
}

/**
 * Deep equality on JSON values. Two numbers are equal by value (1e3 eq 1000),
 * two strings as text ("00123" and "123" are distinct identifiers), and a number
 * equals a string that is its own decimal text (12 eq "12": a rule author may
 * write 12 for an id a call sends as "12"). A number and a string of the same
 * value written otherwise (12 and "0012", 100 and "100.00") cannot be told
 * apart: equal would let 12 through an `ne`/`in` allow-list of "0012", unequal
 * would let "100.00" past an `eq` block of 100. Either way a rule fails open,
 * so the rule cannot be evaluated and blocks (fail closed). Declared amounts
 * compare by value before this (sameDecimal).
 */
function jsonEqualDeep(a: unknown, b: unknown, depth = 0, texts = false): boolean {
  if (depth > 64) throw new Unevaluable('value nested too deeply');
  if (typeof a === 'number' || typeof b === 'number') {
    if (typeof a === 'number' && typeof b === 'number') return a === b;
    const [num, other] = typeof a === 'number' ? [a, b] : [b as number, a];
    return typeof other === 'string' && (other === String(num) || unequalUnlessOneNumber(num, other));
  }
  if (texts && typeof a === 'string' && typeof b === 'string') return a === b || unequalUnlessOneNumber(a, b);
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item: unknown, i) => jsonEqualDeep(item, b[i], depth + 1, texts));
  }
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every(
    (k) => Object.hasOwn(b, k) && jsonEqualDeep((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], depth + 1, texts),
  );
}

/** False for two values that are not one number spelt two ways; throws (the rule cannot be evaluated) for two that are. */
function unequalUnlessOneNumber(a: number | string, b: string): false {
  const left = parseDecimal(a);
  const right = parseDecimal(b);
  if (left !== null && right !== null && compareDecimals(left, right) === 0) {
    throw new Unevaluable('the param and the rule value are one number spelt two ways (12 and "0012", 100 and "100.00"), which the vendor may read as one value or two: write the rule value as the calls send it');
  }
  return false;
}
