import {
  FORBIDDEN_PATH_SEGMENTS,
  PATH_SEGMENT_PATTERN,
  POLICY_DECISIONS,
  RISK_LEVELS,
  type PolicyCondition,
  type PolicyDecision,
  type PolicyDecisionType,
  type PolicyEvaluationInput,
  type RiskLevel,
} from './policy.types.js';

const DEFAULT_BY_RISK = {
  low: 'allow',
  medium: 'observe',
  high: 'require_expert_approval',
} as const satisfies Record<RiskLevel, PolicyDecisionType>;

/** A condition the engine cannot decide. The rule that holds it blocks: fail closed, never fail open. */
class Unevaluable extends Error {}

/**
 * First matching rule wins; no match falls back to the catalog risk default.
 * Never throws: rules come back from the database as JSON, so anything malformed
 * or surprising inside evaluation turns into `block`.
 */
export function evaluatePolicy(input: PolicyEvaluationInput): PolicyDecision {
  let current: unknown;
  let risk: RiskLevel = 'high';
  try {
    if (!isRiskLevel(input.catalogRisk)) throw new Unevaluable('the catalog risk level is unknown');
    risk = input.catalogRisk;
    const qualified = `${input.toolName}.${input.action}`;
    const kinds: ParamKinds = {
      decimals: input.decimalParams ?? [],
      paths: input.pathParams ?? [],
      texts: input.textParams ?? [],
      canonical: input.canonicalValue ?? ((_param, value) => value),
    };
    for (const rule of input.rules) {
      current = rule;
      if (!ruleMatches(rule, input.toolName, qualified, risk, input.params, kinds)) continue;
      return {
        decision: rule.decision,
        riskLevel: rule.riskLevel ?? risk,
        ruleId: rule.id,
        reason: typeof rule.reason === 'string' && rule.reason !== '' ? rule.reason : `matched policy rule "${rule.id}"`,
      };
    }
    return { decision: DEFAULT_BY_RISK[risk], riskLevel: risk, ruleId: null, reason: `default for ${risk} risk` };
  } catch (error) {
    // The reason is stored in the ledger and shown to experts: it names the rule and the condition, never param values.
    const why = error instanceof Unevaluable ? error.message : 'evaluation failed';
    const ruleId = safeRuleId(current);
    const ruleRisk = safeRuleRisk(current);
    return {
      decision: 'block',
      riskLevel: ruleRisk ?? risk,
      ruleId,
      reason: ruleId === null ? `policy could not be evaluated: ${why}` : `policy rule "${ruleId}" could not be evaluated: ${why}`,
    };
  }
}

/** How eq, ne and in compare a param with a rule's value, beyond JSON equality (PolicyEvaluationInput). */
interface ParamKinds {
  decimals: readonly string[];
  paths: readonly string[];
  texts: readonly string[];
  canonical: (param: string, value: unknown) => unknown;
}

function ruleMatches(rule: unknown, toolName: string, qualified: string, risk: RiskLevel, params: unknown, kinds: ParamKinds): boolean {
  if (!isRecord(rule) || typeof rule.id !== 'string') throw new Unevaluable('malformed rule');
  if (!(POLICY_DECISIONS as readonly unknown[]).includes(rule.decision)) throw new Unevaluable('unknown decision');
  if (rule.riskLevel !== undefined && !isRiskLevel(rule.riskLevel)) throw new Unevaluable('unknown risk level');
  const match = rule.match;
  if (match === undefined) return true;
  if (!isRecord(match)) throw new Unevaluable('malformed match');
  if (match.toolName !== undefined && !toolNameMatches(match.toolName, toolName, qualified)) return false;
  if (match.riskLevel !== undefined) {
    if (!isRiskLevel(match.riskLevel)) throw new Unevaluable('unknown match.riskLevel');
    if (match.riskLevel !== risk) return false;
  }
  const where = match.where ?? [];
  if (!Array.isArray(where)) throw new Unevaluable('malformed where');
  // In order, stopping at the first false: an `exists` guard placed before a numeric comparison
  // makes an optional param safe to compare (the comparison is never reached when it is absent).
  for (let i = 0; i < where.length; i++) {
    if (!conditionHolds(where[i], params, `where[${i}]`, kinds)) return false;
  }
  return true;
}

function toolNameMatches(pattern: unknown, toolName: string, qualified: string): boolean {
  if (typeof pattern !== 'string') throw new Unevaluable('malformed match.toolName');
  return pattern.endsWith('.*') ? pattern.slice(0, -2) === toolName : pattern === qualified;
}

function conditionHolds(condition: unknown, params: unknown, label: string, kinds: ParamKinds): boolean {
  if (!isRecord(condition)) throw new Unevaluable(`${label} is malformed`);
  const { path, op, value } = condition as Partial<PolicyCondition>;
  const where = `${label} (${typeof path === 'string' ? path : '?'} ${typeof op === 'string' ? op : '?'})`;
  const found = resolvePath(params, path, where);
  const jsonEqual = equalityAt(path as string, kinds); // resolvePath refused any other path
  switch (op) {
    case 'exists': {
      const wanted = value === undefined ? true : value;
      if (typeof wanted !== 'boolean') throw new Unevaluable(`${where}: value must be a boolean`);
      return (found.present && found.value !== null && found.value !== undefined) === wanted;
    }
    // A missing param is not equal to anything: eq and in are false, ne is true.
    case 'eq':
      return found.present && jsonEqual(found.value, requireValue(value, where));
    case 'ne':
      return !(found.present && jsonEqual(found.value, requireValue(value, where)));
    case 'in': {
      if (!Array.isArray(value)) throw new Unevaluable(`${where}: value must be an array`);
      return found.present && value.some((candidate: unknown) => jsonEqual(found.value, candidate));
    }
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      const left = found.present ? parseDecimal(found.value) : null;
      if (left === null) throw new Unevaluable(`${where}: the param is missing or not a finite number`);
      const right = parseDecimal(value);
      if (right === null) throw new Unevaluable(`${where}: the rule value is not a finite number`);
      const order = compareDecimals(left, right);
      return op === 'gt' ? order > 0 : op === 'gte' ? order >= 0 : op === 'lt' ? order < 0 : order <= 0;
    }
    default:
      throw new Unevaluable(`${where}: unknown operator`);
  }
}

/**
 * Whether a param equals a rule's value, for eq, ne and in. The value of a top-level param is first put in the
 * spelling the call's params were rewritten into (the admin's "v1/x" is the call's "/v1/x"). Then a declared
 * decimal param equals the same amount however either is written; a declared URL path equals a value that
 * differs only by a trailing "/"; within a param sent as text, the same text is equal too (false, "false").
 */
function equalityAt(path: string, kinds: ParamKinds): (param: unknown, ruleValue: unknown) => boolean {
  const topLevel = !path.includes('.');
  const byValue = kinds.decimals.includes(path);
  const byPath = kinds.paths.includes(path);
  const byText = kinds.texts.includes(path.split('.')[0]);
  return (param, ruleValue) => {
    const value = topLevel ? kinds.canonical(path, ruleValue) : ruleValue;
    return (
      (byValue ? sameDecimal(param, value) : null) ??
      (byPath ? samePath(param, value) : null) ??
      ((byText && sameText(param, value)) || jsonEqualDeep(param, value))
    );
  };
}

function requireValue(value: unknown, where: string): unknown {
  if (value === undefined) throw new Unevaluable(`${where}: value is missing`);
  return value;
}

type Lookup = { present: false; value?: undefined } | { present: true; value: unknown };

/** Own data properties only: a path never reaches the prototype chain, a getter, or an array's `length`. */
function resolvePath(root: unknown, path: unknown, where: string): Lookup {
  if (typeof path !== 'string' || path === '') throw new Unevaluable(`${where}: malformed path`);
  const segments = path.split('.');
  if (segments.some((s) => !PATH_SEGMENT_PATTERN.test(s) || FORBIDDEN_PATH_SEGMENTS.has(s))) {
    throw new Unevaluable(`${where}: malformed path`);
  }
  let node = root;
  for (const segment of segments) {
    if (node === null || typeof node !== 'object') return { present: false };
    if (Array.isArray(node) && !/^(?:0|[1-9]\d*)$/.test(segment)) return { present: false };
    const descriptor = Object.getOwnPropertyDescriptor(node, segment);
    if (descriptor === undefined) return { present: false };
    if (!('value' in descriptor)) throw new Unevaluable(`${where}: param is not plain data`);
    node = descriptor.value;
  }
  return { present: true, value: node };
}

/** Whether two URL paths are the same but for one trailing "/" ("/v1/users/" and "/v1/users"); null unless both are strings. */
function samePath(a: unknown, b: unknown): boolean | null {
  if (typeof a !== 'string' || typeof b !== 'string') return null;
  const bare = (p: string): string => (p.length > 1 && p.endsWith('/') ? p.slice(0, -1) : p);
  return bare(a) === bare(b);
}

/** Whether two values are sent as the same text: every scalar as String(v), so false and "false" are one ?dryRun=false. */
function sameText(a: unknown, b: unknown): boolean {
  return jsonEqualDeep(asText(a), asText(b));
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
 * Deep equality on JSON values. A number equals a string when the string is a
 * decimal of the same value (100 eq "100.00"): amounts arrive as decimal strings
 * (Shopify) while rule authors naturally write numbers. Two strings compare as
 * text, so identifiers like "00123" and "123" stay distinct.
 */
function jsonEqualDeep(a: unknown, b: unknown, depth = 0): boolean {
  if (depth > 64) throw new Unevaluable('value nested too deeply');
  if (typeof a === 'number' || typeof b === 'number') {
    const left = parseDecimal(a);
    const right = parseDecimal(b);
    return left !== null && right !== null && compareDecimals(left, right) === 0;
  }
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item: unknown, i) => jsonEqualDeep(item, b[i], depth + 1));
  }
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every(
    (k) => Object.hasOwn(b, k) && jsonEqualDeep((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], depth + 1),
  );
}

/** A finite number as exact decimal digits, so "100.0000000000000001" > 100 holds (floats would say equal). */
export interface Decimal {
  negative: boolean;
  /** integer digits without leading zeros ("" for zero) */
  int: string;
  /** fraction digits without trailing zeros */
  frac: string;
}

/** Plain decimal text only: no exponent, hex, sign "+", blanks or empty string. */
const DECIMAL_TEXT = /^-?\d+(?:\.\d+)?$/;

export function parseDecimal(value: unknown): Decimal | null {
  let text: string;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return null;
    text = expandExponent(String(value));
  } else if (typeof value === 'string') {
    if (value.length > 100 || !DECIMAL_TEXT.test(value) || !Number.isFinite(Number(value))) return null;
    text = value;
  } else {
    return null;
  }
  const negative = text.startsWith('-');
  const [whole = '', fraction = ''] = (negative ? text.slice(1) : text).split('.');
  const int = whole.replace(/^0+/, '');
  const frac = fraction.replace(/0+$/, '');
  return { negative: negative && (int !== '' || frac !== ''), int, frac };
}

export function compareDecimals(a: Decimal, b: Decimal): -1 | 0 | 1 {
  if (a.negative !== b.negative) return a.negative ? -1 : 1;
  const sign = a.negative ? -1 : 1;
  if (a.int.length !== b.int.length) return (a.int.length > b.int.length ? sign : -sign) as -1 | 1;
  const width = Math.max(a.frac.length, b.frac.length);
  const left = a.int + a.frac.padEnd(width, '0');
  const right = b.int + b.frac.padEnd(width, '0');
  if (left === right) return 0;
  return (left > right ? sign : -sign) as -1 | 1;
}

/** String(1e21) is "1e+21" and String(1.5e-7) is "1.5e-7": write them out digit by digit. */
function expandExponent(text: string): string {
  const m = /^(-?)(\d+)(?:\.(\d+))?e([+-]\d+)$/.exec(text);
  if (m === null) return text;
  const [, sign = '', whole = '', fraction = '', exponent = '0'] = m;
  const digits = whole + fraction;
  const point = whole.length + Number(exponent);
  if (point <= 0) return `${sign}0.${'0'.repeat(-point)}${digits}`;
  if (point >= digits.length) return sign + digits + '0'.repeat(point - digits.length);
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

function isRiskLevel(value: unknown): value is RiskLevel {
  return (RISK_LEVELS as readonly unknown[]).includes(value);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function safeRuleId(rule: unknown): string | null {
  try {
    return isRecord(rule) && typeof rule.id === 'string' ? rule.id : null;
  } catch {
    return null;
  }
}

function safeRuleRisk(rule: unknown): RiskLevel | null {
  try {
    return isRecord(rule) && isRiskLevel(rule.riskLevel) ? rule.riskLevel : null;
  } catch {
    return null;
  }
}
