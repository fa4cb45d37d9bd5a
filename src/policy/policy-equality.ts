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

/** Equal, unequal, or one number spelt two ways, which a vendor may read as one value or two. */
type Sameness = 'equal' | 'unequal' | 'ambiguous';

const AMBIGUOUS =
  'the param and the rule value are one number spelt two ways (12 and "0012", 100 and "100.00"), which the vendor may read as one value or two: write the rule value as the calls send it';

/**
 * Whether a param equals a rule's value, for eq and ne (throws Unevaluable for one number spelt two ways). The value
 * of a top-level param is first put in the spelling the call's params were rewritten into (the admin's "v1/x" is the
 * call's "/v1/x"). Then a declared decimal param equals the same amount however either is written; a declared URL
 * path equals a value that differs only by a trailing "/"; within a param sent as text, a number or boolean equals
 * its own text (false, "false"; 12, "12").
 */
export function equalityAt(path: string, kinds: ParamKinds): (param: unknown, ruleValue: unknown) => boolean {
  const compare = comparisonAt(path, kinds);
  return (param, ruleValue) => {
    const sameness = compare(param, ruleValue);
    if (sameness === 'ambiguous') throw new Unevaluable(AMBIGUOUS);
    return sameness === 'equal';
  };
}

/**
 * Whether a param equals one of a rule's values, for in: an equal one anywhere in the list counts before any clash of
 * spellings (a list naming both 12 and "0012" holds for either), and only with none equal does a clash make the
 * rule unevaluable.
 */
export function membershipAt(path: string, kinds: ParamKinds): (param: unknown, ruleValues: readonly unknown[]) => boolean {
  const compare = comparisonAt(path, kinds);
  return (param, ruleValues) => {
    let ambiguous = false;
    for (const candidate of ruleValues) {
      const sameness = compare(param, candidate);
      if (sameness === 'equal') return true;
      if (sameness === 'ambiguous') ambiguous = true;
    }
    if (ambiguous) throw new Unevaluable(AMBIGUOUS);
    return false;
  };
}

function comparisonAt(path: string, kinds: ParamKinds): (param: unknown, ruleValue: unknown) => Sameness {
  const topLevel = !path.includes('.');
  const byValue = kinds.decimals.includes(path);
  const byPath = kinds.paths.includes(path);
  const byText = kinds.texts.includes(path.split('.')[0]);
  return (param, ruleValue) => {
    const value = topLevel ? kinds.canonical(path, ruleValue) : ruleValue;
    const special = (byValue ? sameDecimal(param, value) : null) ?? (byPath ? samePath(param, value) : null);
    if (special !== null) return special ? 'equal' : 'unequal';
    return jsonSameness(param, value, byText);
  };
}

/** Whether two URL paths are the same but for one trailing "/" ("/v1/users/" and "/v1/users"); null unless both are strings. */
function samePath(a: unknown, b: unknown): boolean | null {
  if (typeof a !== 'string' || typeof b !== 'string') return null;
  const bare = (p: string): string => (p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p);
  return bare(a) === bare(b);
}

/** Whether two values are the same decimal amount; null when either is not a decimal (then they compare as JSON). */
function sameDecimal(a: unknown, b: unknown): boolean | null {
  const left = parseDecimal(a);
  const right = parseDecimal(b);
  return left === null || right === null ? null : compareDecimals(left, right) === 0;
}

/**
 * Deep equality on JSON values. Two numbers are equal by value (1e3 and 1000), two strings as text ("00123" and "123"
 * are distinct identifiers), and a number equals a string that is its own decimal text (12 and "12": a rule author
 * may write 12 for an id a call sends as "12"). A number and a string of the same value spelt otherwise (12 and
 * "0012", 100 and "100.00") are ambiguous: equal would let 12 through an `ne`/`in` allow-list of "0012", unequal
 * would let "100.00" past an `eq` block of 100 — either way a rule fails open, so the rule cannot be evaluated and
 * blocks (fail closed). Declared amounts compare by value before this (sameDecimal). In a param sent as text
 * (`texts`), a boolean equals its own text too (false and "false" are one ?dryRun=false).
 * Ambiguous only when nothing else differs: {a: 12, b: "x"} and {a: "0012", b: "y"} are unequal.
 */
function jsonSameness(a: unknown, b: unknown, texts: boolean, depth = 0): Sameness {
  if (depth > 64) throw new Unevaluable('value nested too deeply');
  if (typeof a === 'number' || typeof b === 'number') {
    if (typeof a === 'number' && typeof b === 'number') return a === b ? 'equal' : 'unequal';
    const [num, other] = typeof a === 'number' ? [a, b] : [b as number, a];
    if (typeof other !== 'string') return 'unequal';
    if (other === String(num)) return 'equal';
    const left = parseDecimal(num);
    const right = parseDecimal(other);
    return left !== null && right !== null && compareDecimals(left, right) === 0 ? 'ambiguous' : 'unequal';
  }
  if (texts && (typeof a === 'boolean' || typeof b === 'boolean')) {
    if (typeof a === typeof b) return a === b ? 'equal' : 'unequal';
    return (typeof a === 'string' || typeof b === 'string') && String(a) === String(b) ? 'equal' : 'unequal';
  }
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b ? 'equal' : 'unequal';
  let ambiguous = false;
  const each = (x: unknown, y: unknown): boolean => {
    const s = jsonSameness(x, y, texts, depth + 1);
    if (s === 'ambiguous') ambiguous = true;
    return s !== 'unequal';
  };
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return 'unequal';
    if (!a.every((item: unknown, i) => each(item, b[i]))) return 'unequal';
    return ambiguous ? 'ambiguous' : 'equal';
  }
  // The rule's side is walked (its size is the policy's); the call's is only counted, once per object (keyCount).
  if (keyCount(a) !== keyCount(b)) return 'unequal';
  const keys = Object.keys(b);
  if (!keys.every((k) => Object.hasOwn(a, k) && each((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))) return 'unequal';
  return ambiguous ? 'ambiguous' : 'equal';
}

/**
 * How many own keys an object has, counted once: a call's param is compared with every value of every rule (an `in`
 * list of 500 objects against a body of 40,000 members counted them 500 times, seconds of CPU). Params are parsed
 * JSON, never changed once evaluated, and the map holds them no longer than the call does.
 */
const keyCounts = new WeakMap<object, number>();
function keyCount(o: object): number {
  let n = keyCounts.get(o);
  if (n === undefined) {
    n = Object.keys(o).length;
    keyCounts.set(o, n);
  }
  return n;
}
