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
import { compareDecimals, parseDecimal } from './policy-decimal.js';
import { equalityAt, isRecord, membershipAt, TextFacts, Unevaluable, type ParamKinds } from './policy-equality.js';

export { compareDecimals, parseDecimal, type Decimal } from './policy-decimal.js';

const DEFAULT_BY_RISK = {
  low: 'allow',
  medium: 'observe',
  high: 'require_expert_approval',
} as const satisfies Record<RiskLevel, PolicyDecisionType>;

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
      facts: new TextFacts(),
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
      return found.present && membershipAt(path as string, kinds)(found.value, value);
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

function requireValue(value: unknown, where: string): unknown {
  if (value === undefined) throw new Unevaluable(`${where}: value is missing`);
  return value;
}

type Lookup = { present: false; value?: undefined } | { present: true; value: unknown };

const SPELT_TWO_WAYS =
  'the param holds a member the rule names spelt another way (another letter case or Unicode form, with [] or [n] after it, ' +
  'a dotted or bracketed name for a member inside it, or "." or " " for "_" as PHP reads query names), which the vendor may read as the member the rule names: send it once, as the rule names it';

/**
 * A member name as a lenient server may read it: NFKC (fullwidth letters), trimmed, lower case (Go's encoding/json,
 * ASP.NET Core's binders), and only what comes before a `.` or `[` (Rails, PHP and qs read `amount[]` as `amount` and
 * `refund[amount]` or `refund.amount` as a member of `refund`; MongoDB's $set and lodash's set read dotted names so).
 */
function memberStem(name: string): string {
  return name.normalize('NFKC').trim().toLowerCase().split(/[.[]/, 1)[0]!;
}

/**
 * A query (or form) member name as PHP registers it (WordPress, WooCommerce, Magento behind the Nango proxy): leading
 * blanks dropped, "." and " " before the first "[" made "_", and a "[" never closed made "_" (include.deleted,
 * "include deleted" and include[deleted all arrive as $_GET['include_deleted']); a closed "[" opens a member of what
 * comes before it. Then as memberStem reads it (NFKC, lower case).
 */
function phpStem(name: string): string {
  const n = name.normalize('NFKC').replace(/^\s+/, '').toLowerCase();
  const open = n.indexOf('[');
  if (open < 0) return n.replace(/[ .]/g, '_');
  const head = n.slice(0, open).replace(/[ .]/g, '_');
  return n.includes(']', open) ? head : `${head}_${n.slice(open + 1)}`;
}

/**
 * Each object's member names by what a lenient server may read them as (memberStem, and phpStem where it differs),
 * computed once an object (a policy reads the same params for every rule): the first name of each reading, or null
 * once a second one has it (then some name differs from any segment). Not the list of names: copying it for each name
 * made 45,000 members of one stem ("a.0" … "a.44999", a 512 KiB body) take 13.5 s.
 */
const readings = new WeakMap<object, Map<string, string | null>>();

/**
 * Whether `node` has a member other than `segment` that a lenient vendor may read as `segment`: the tools that take
 * free-form members (the Nango proxy's body and query) send the names as the agent wrote them, and a rule on `amount`
 * never saw {"amount": 1, "Amount": 5000} or {"AMOUNT": 5000}. Such a param fails closed (block), as a value spelt two
 * ways does (policy-equality.ts).
 */
function hasOtherSpelling(node: object, segment: string): boolean {
  let byReading = readings.get(node);
  if (!byReading) {
    const map = new Map<string, string | null>();
    const add = (reading: string, key: string) => map.set(reading, map.has(reading) && map.get(reading) !== key ? null : key);
    for (const key of Object.keys(node)) {
      const stem = memberStem(key);
      const php = phpStem(key);
      add(stem, key);
      if (php !== stem) add(php, key);
    }
    readings.set(node, map);
    byReading = map;
  }
  const stem = memberStem(segment);
  return byReading.has(stem) && byReading.get(stem) !== segment;
}

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
    if (!Array.isArray(node) && hasOtherSpelling(node, segment)) throw new Unevaluable(`${where}: ${SPELT_TWO_WAYS}`);
    const descriptor = Object.getOwnPropertyDescriptor(node, segment);
    if (descriptor === undefined) return { present: false };
    if (!('value' in descriptor)) throw new Unevaluable(`${where}: param is not plain data`);
    node = descriptor.value;
  }
  return { present: true, value: node };
}

function isRiskLevel(value: unknown): value is RiskLevel {
  return (RISK_LEVELS as readonly unknown[]).includes(value);
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
