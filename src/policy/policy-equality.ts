import { compareDecimals, parseDecimal, type Decimal } from './policy-decimal.js';

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
  /** Kept for one evaluation (evaluatePolicy): a long param's Unicode form, worked out once however many values it meets. */
  facts?: TextFacts;
}

/** Texts longer than this have their folded form kept (TextFacts); shorter ones cost less than the look-up. */
const KEPT_FROM = 256;
const KEPT_MAX = 8;

/**
 * The Unicode compatibility form (NFKC) of the texts one policy evaluation compares, the long ones worked out once:
 * a call's param meets every value of every rule on its path (up to 500 in one `in`, and the rules of a 64 KiB
 * policy), and working out a 500 KiB param's form for each of them held the event loop 12 s for one rule's list
 * (4 s for an ASCII param, checked for ASCII each time). Keeps a few (KEPT_MAX), the param and long rule values.
 */
export class TextFacts {
  /** Made on the first long text: most evaluations meet none. */
  private kept: Map<string, string> | undefined;

  /** The text in NFKC; an ASCII text is its own. */
  folded(text: string): string {
    if (text.length < KEPT_FROM) return fold(text);
    this.kept ??= new Map();
    const known = this.kept.get(text);
    if (known !== undefined) {
      // Kept as the most recent: the call's param, met by every value, is never the one evicted by the rule's values.
      this.kept.delete(text);
      this.kept.set(text, known);
      return known;
    }
    const form = fold(text);
    if (this.kept.size >= KEPT_MAX) this.kept.delete(this.kept.keys().next().value!);
    this.kept.set(text, form);
    return form;
  }
}

const fold = (text: string): string => (isAscii(text) ? text : text.normalize('NFKC'));

/** How two spellings of one value clash: a number, a boolean, a text in two Unicode forms, a path in two letter cases. */
type Clash = 'number' | 'boolean' | 'unicode' | 'case';

/** Equal, unequal, or one value spelt two ways, which a vendor may read as one value or two. */
type Sameness = 'equal' | 'unequal' | { clash: Clash };

const CLASHES: Readonly<Record<Clash, { clash: Clash }>> = {
  number: { clash: 'number' },
  boolean: { clash: 'boolean' },
  unicode: { clash: 'unicode' },
  case: { clash: 'case' },
};

const ONE_OR_TWO = 'which the vendor may read as one value or two: write the rule value as the calls send it';
const AMBIGUOUS: Readonly<Record<Clash, string>> = {
  number: `the param and the rule value are one number spelt two ways (12 and "0012", "+12", " 12" or "1.2e1", 100 and "100.00"), ${ONE_OR_TWO}`,
  boolean: `the param and the rule value are one boolean spelt two ways (true and "True", "1", "yes" or "on"), ${ONE_OR_TWO}`,
  unicode: `the param and the rule value are one text in two Unicode forms (an accent composed or not, a fullwidth letter), ${ONE_OR_TWO}`,
  case: `the param and the rule value are one URL path in two letter cases, ${ONE_OR_TWO}`,
};

/**
 * Whether a param equals a rule's value, for eq and ne (throws Unevaluable for one value spelt two ways). The value
 * of a top-level param is first put in the spelling the call's params were rewritten into (the admin's "v1/x" is the
 * call's "/v1/x"). Then a declared decimal param equals the same amount however either is written; a declared URL
 * path equals a value that differs only by a trailing "/"; within a param sent as text, a number or boolean equals
 * its own text (false, "false"; 12, "12").
 */
export function equalityAt(path: string, kinds: ParamKinds): (param: unknown, ruleValue: unknown) => boolean {
  const compare = comparisonAt(path, kinds);
  return (param, ruleValue) => {
    const sameness = compare(param, ruleValue);
    if (typeof sameness === 'object') throw new Unevaluable(AMBIGUOUS[sameness.clash]);
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
    let clash: Clash | null = null;
    for (const candidate of ruleValues) {
      const sameness = compare(param, candidate);
      if (sameness === 'equal') return true;
      if (typeof sameness === 'object') clash ??= sameness.clash;
    }
    if (clash !== null) throw new Unevaluable(AMBIGUOUS[clash]);
    return false;
  };
}

function comparisonAt(path: string, kinds: ParamKinds): (param: unknown, ruleValue: unknown) => Sameness {
  const topLevel = !path.includes('.');
  const byValue = kinds.decimals.includes(path);
  const byPath = kinds.paths.includes(path);
  const byText = kinds.texts.includes(path.split('.')[0]);
  const facts = kinds.facts ?? new TextFacts();
  return (param, ruleValue) => {
    const value = topLevel ? kinds.canonical(path, ruleValue) : ruleValue;
    const decimal = byValue ? sameDecimal(param, value) : null;
    if (decimal !== null) return decimal ? 'equal' : 'unequal';
    return (byPath ? samePath(param, value) : null) ?? jsonSameness(param, value, byText, facts);
  };
}

/**
 * Whether two URL paths are the same but for one trailing "/" ("/v1/users/" and "/v1/users"); null unless both are
 * strings. Two that differ only in letter case clash, written or percent-encoded: a case-insensitive router (ASP.NET
 * Core, IIS) reads "/v1/Admin/Users" as "/v1/admin/users" and "/v1/%C3%89quipes" as "/v1/%C3%A9quipes", a
 * case-sensitive one as another path.
 */
function samePath(a: unknown, b: unknown): Sameness | null {
  if (typeof a !== 'string' || typeof b !== 'string') return null;
  const bare = (p: string): string => (p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p);
  const [left, right] = [bare(a), bare(b)];
  if (left === right) return 'equal';
  if (left.length === right.length && left.toLowerCase() === right.toLowerCase()) return CLASHES.case;
  // A letter written percent-encoded differs in its hex digits, not its case (%C3%A9 é, %C3%89 É): such a router decodes
  // first, so the paths are compared decoded too.
  return caseFoldedDecoded(left) === caseFoldedDecoded(right) ? CLASHES.case : 'unequal';
}

/** A path percent-decoded (as written where an escape is malformed), NFKC, lower case. */
function caseFoldedDecoded(path: string): string {
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    // a malformed escape: compared as written
  }
  return decoded.normalize('NFKC').toLowerCase();
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
 * may write 12 for an id a call sends as "12"). A number and a string a lenient reader takes for the same value
 * (12 and "0012", "+12", " 12", "1.2e1", "0x0C"; 100 and "100.00") clash: equal would let 12 through an `ne`/`in`
 * allow-list of "0012", unequal would let "+12" past an `eq` block of 12 — either way a rule fails open, so the rule
 * cannot be evaluated and blocks (fail closed). Declared amounts compare by value before this (sameDecimal). In a
 * param sent as text (`texts`), a boolean equals its own text too (false and "false" are one ?dryRun=false), and any
 * other text a lenient reader (Django, Spring, pydantic) takes for that boolean ("True", "1", "on", "yes"; the
 * number 1, sent as "1") clashes with it; elsewhere (a JSON body) a boolean and a text stay two types. Two
 * strings alike but for their Unicode form (NFKC: "Jose\u0301" and "José", fullwidth letters) clash as well.
 * A clash counts only when nothing else differs: {a: 12, b: "x"} and {a: "0012", b: "y"} are unequal.
 */
function jsonSameness(a: unknown, b: unknown, texts: boolean, facts: TextFacts, depth = 0): Sameness {
  if (depth > 64) throw new Unevaluable('value nested too deeply');
  if (texts && (typeof a === 'boolean' || typeof b === 'boolean')) {
    if (typeof a === typeof b) return a === b ? 'equal' : 'unequal';
    const [bool, other] = typeof a === 'boolean' ? [a, b] : [b as boolean, a];
    // A number is sent as its text too: 1 is "1".
    const text = typeof other === 'number' ? String(other) : other;
    if (typeof text !== 'string') return 'unequal';
    if (text === String(bool)) return 'equal';
    return lenientBoolean(text) === bool ? CLASHES.boolean : 'unequal';
  }
  if (typeof a === 'number' || typeof b === 'number') {
    if (typeof a === 'number' && typeof b === 'number') return a === b ? 'equal' : 'unequal';
    const [num, other] = typeof a === 'number' ? [a, b] : [b as number, a];
    if (typeof other !== 'string') return 'unequal';
    if (other === String(num)) return 'equal';
    return readsAsNumber(other, num) ? CLASHES.number : 'unequal';
  }
  if (typeof a === 'string' && typeof b === 'string') {
    if (a === b) return 'equal';
    // Two ASCII texts are their own forms, so unequal; texts of other lengths are told apart by their lengths alone.
    return facts.folded(a) === facts.folded(b) ? CLASHES.unicode : 'unequal';
  }
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b ? 'equal' : 'unequal';
  let clash: Sameness | null = null;
  const each = (x: unknown, y: unknown): boolean => {
    const s = jsonSameness(x, y, texts, facts, depth + 1);
    if (typeof s === 'object') clash ??= s;
    return s !== 'unequal';
  };
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return 'unequal';
    if (!a.every((item: unknown, i) => each(item, b[i]))) return 'unequal';
    return clash ?? 'equal';
  }
  // The rule's side is walked (its size is the policy's); the call's is only counted, once per object (keyCount).
  if (keyCount(a) !== keyCount(b)) return 'unequal';
  const keys = Object.keys(b);
  if (!keys.every((k) => Object.hasOwn(a, k) && each((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))) return 'unequal';
  return clash ?? 'equal';
}

function isAscii(text: string): boolean {
  return !/[^\p{ASCII}]/u.test(text);
}

/** Longer texts are no number a provider reads as one of a rule's (parseDecimal reads at most 100 characters too). */
const LENIENT_MAX = 100;
const LENIENT_DECIMAL = /^([+-]?)(\d*)(?:\.(\d*))?(?:e([+-]?\d{1,4}))?$/i;
const LENIENT_RADIX = /^([+-]?)0(x[0-9a-f]+|o[0-7]+|b[01]+)$/i;

/**
 * The text as lenient readers clean it before reading a number or a boolean: Unicode compatibility form (fullwidth
 * digits), blanks around it dropped, "_" between digits dropped (Python's int("1_000")).
 */
function cleaned(text: string): string {
  const folded = isAscii(text) ? text : text.normalize('NFKC');
  return folded.trim().replace(/(?<=\d)_(?=\d)/g, '');
}

/**
 * Whether a lenient number reader takes the text for the number: exactly (a sign "+", blanks, leading or trailing
 * zeros, "12.", an exponent, 0x/0o/0b, fullwidth digits) or as a double (Number(text), JSON.parse, float()).
 */
function readsAsNumber(text: string, num: number): boolean {
  if (text.length > LENIENT_MAX || !Number.isFinite(num)) return false;
  const t = cleaned(text);
  const radix = LENIENT_RADIX.exec(t);
  if (radix !== null) {
    const [, sign = '', digits = ''] = radix;
    const value = Number(BigInt(`0${digits.toLowerCase()}`)) * (sign === '-' ? -1 : 1);
    return value === num;
  }
  const m = LENIENT_DECIMAL.exec(t);
  if (m === null) return false;
  const [, sign = '', whole = '', fraction = '', exponent = '0'] = m;
  if (whole === '' && fraction === '') return false;
  if (Number(t) === num) return true;
  const own = parseDecimal(num);
  const exact = exactDecimal(sign === '-', whole, fraction, Number(exponent));
  return own !== null && exact !== null && compareDecimals(own, exact) === 0;
}

/** sign, digits and a power of ten as a Decimal; null when too long to be any double's decimal text. */
function exactDecimal(negative: boolean, whole: string, fraction: string, exponent: number): Decimal | null {
  const digits = (whole + fraction).replace(/^0+/, '');
  if (digits === '') return { negative: false, int: '', frac: '' };
  const point = whole.length + exponent - ((whole + fraction).length - digits.length);
  if (point > 400 || point < -400) return null;
  const padded = point <= 0 ? '0'.repeat(-point) + digits : digits.padEnd(point, '0');
  const at = Math.max(point, 0);
  return { negative, int: padded.slice(0, at).replace(/^0+/, ''), frac: padded.slice(at).replace(/0+$/, '') };
}

const LENIENT_TRUE = new Set(['true', 't', 'yes', 'y', 'on', '1']);
const LENIENT_FALSE = new Set(['false', 'f', 'no', 'n', 'off', '0']);

/** The boolean a lenient reader (Django, Spring, pydantic, Jackson) takes the text for, or null. */
function lenientBoolean(text: string): boolean | null {
  if (text.length > LENIENT_MAX) return null;
  const t = cleaned(text).toLowerCase();
  if (LENIENT_TRUE.has(t) || readsAsNumber(t, 1)) return true;
  if (LENIENT_FALSE.has(t) || readsAsNumber(t, 0)) return false;
  return null;
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
