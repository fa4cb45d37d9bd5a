import { codePoints } from '../common/http/code-point-length.js';
import { isEchoableFieldName } from '../common/echoable-field-name.js';
import { parseDecimal } from './policy.engine.js';
import type { ParamNames, ToolParams } from './policy-param-names.js';
import type { RuleScope, RuleValueProblem } from './policy-rule-values.js';
import type { RiskLevel } from './policy.types.js';
import {
  CONDITION_OPS,
  FORBIDDEN_PATH_SEGMENTS,
  NUMERIC_OPS,
  PATH_SEGMENT_PATTERN,
  POLICY_DECISIONS,
  POLICY_LIMITS,
  RISK_LEVELS,
  RULE_ID_PATTERN,
  type ConditionOp,
  type PolicyCondition,
  type PolicyRule,
  type PolicyRuleMatch,
} from './policy.types.js';

export type PolicyRulesValidation = { ok: true; rules: PolicyRule[] } | { ok: false; errors: string[] };

const RULE_FIELDS = new Set(['id', 'match', 'decision', 'riskLevel', 'reason']);
const MATCH_FIELDS = new Set(['toolName', 'riskLevel', 'where']);
const CONDITION_FIELDS = new Set(['path', 'op', 'value']);
/** "tool.action" or "tool.*"; catalog names are snake_case identifiers. The OpenAPI rule schema documents it. */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_-]+\.(?:[A-Za-z0-9_-]+|\*)$/;
/** Enough to act on, small enough for a problem+json body. */
const MAX_ERRORS = 50;

/**
 * Checks a rule list as an admin PUTs it (the array under `rules`). Expected
 * mistakes come back as messages that each name the rule; it never throws,
 * whatever the input. On success the rules are fresh copies holding only known fields.
 */
/**
 * What the catalog offers: `tool.action` keys, tool names and the params a rule's toolName covers. Given, a rule
 * naming something the catalog lacks is refused. Only a PUT passes it: stored rules are not checked again.
 */
export interface KnownTools {
  has(key: string): boolean;
  isTool(toolName: string): boolean;
  /** Absent (a stand-in catalog), a where path is checked for its shape only. */
  paramsOf?(toolName: string | undefined): ParamNames | undefined;
  /** The catalog's tools: the names a 400 lists when it does not echo the one it was sent. */
  list?(): readonly ToolParams[];
  /** Why no call a rule applies to can carry an eq/ne/in value (ruleValueProblems). Absent, a value is checked for its shape only. */
  valueProblem?: RuleValueProblem;
  /** The risk levels of the catalog actions a toolName names (every action without one). Absent, match.riskLevel is checked for its shape only. */
  risksOf?(toolName: string | undefined): readonly RiskLevel[];
  /** Whether no call a rule applies to can hold a value at the path (catalogRuleChecks). Absent, not checked. */
  pathAbsent?(scope: RuleScope, path: string): boolean;
  /** The actions ("tool.action") a rule applies to whose calls never hold a value at the path. Absent, not checked. */
  actionsWithout?(scope: RuleScope, path: string): readonly string[];
  /** The actions a rule applies to that take the path but whose calls never hold a number or a decimal text there. Absent, not checked. */
  actionsNeverNumeric?(scope: RuleScope, path: string): readonly string[];
  /**
   * Why every call a rule applies to holds a value at the path when the policy runs ('required' by the schema, or
   * a 'default' the gateway fills in), or null when some call may lack it. Absent, not checked.
   */
  alwaysHeld?(scope: RuleScope, path: string): 'required' | 'default' | null;
  /**
   * The actions a rule applies to whose calls may leave the path's param out and get a value for it only after the
   * policy ran (ToolActionSpec.unseenDefaults), each with what leaving it out means. Absent, not checked.
   */
  unseenDefaults?(scope: RuleScope, path: string): readonly UnseenDefault[];
}

/** An action ("tool.action") whose calls may leave a param out, and what leaving it out means (a clause). */
export interface UnseenDefault {
  action: string;
  meaning: string;
}

/** What a 400 says instead of a name it does not echo (it may be a pasted secret, see isEchoableFieldName). */
const NOT_NAMED = 'not named here as it does not look like a name';

export function validatePolicyRules(input: unknown, known?: KnownTools): PolicyRulesValidation {
  try {
    return validate(input, known);
  } catch {
    return { ok: false, errors: ['rules could not be read as JSON data'] };
  }
}

function validate(input: unknown, known: KnownTools | undefined): PolicyRulesValidation {
  if (!Array.isArray(input)) return { ok: false, errors: ['rules must be an array'] };
  if (input.length > POLICY_LIMITS.maxRules) {
    return { ok: false, errors: [`rules: at most ${POLICY_LIMITS.maxRules} rules are allowed (got ${input.length})`] };
  }
  const errors: string[] = [];
  const rules: PolicyRule[] = [];
  const seen = new Map<string, number>();
  /** The rules so far with no where conditions, by position: each takes every call its scope names. */
  const unconditional: { index: number; rule: PolicyRule }[] = [];
  for (let i = 0; i < input.length; i++) {
    const raw: unknown = input[i];
    const [id] = isRecord(raw) ? ownValues(raw, ['id']) : [undefined];
    const label = typeof id === 'string' && RULE_ID_PATTERN.test(id) ? `rules[${i}] (${JSON.stringify(id)})` : `rules[${i}]`;
    const fail = (message: string): void => void errors.push(`${label}: ${message}`);
    const rule = checkRule(raw, fail, known);
    if (rule === null) continue;
    const first = seen.get(rule.id);
    if (first !== undefined) fail(`duplicate id, already used by rules[${first}]`);
    else seen.set(rule.id, i);
    // Judged with the catalog only (a PUT): a stored policy is read as it is, and one refused there would fail closed.
    if (known) {
      const by = unconditional.find((u) => shadows(u.rule, rule, known));
      if (by !== undefined) fail(shadowed(by.index, by.rule.id));
      if ((rule.match?.where ?? []).length === 0) unconditional.push({ index: i, rule });
    }
    rules.push(rule);
  }
  if (errors.length > 0) {
    const shown = errors.slice(0, MAX_ERRORS);
    if (errors.length > MAX_ERRORS) shown.push(`... and ${errors.length - MAX_ERRORS} more errors`);
    return { ok: false, errors: shown };
  }
  return { ok: true, rules };
}

type Fail = (message: string) => void;

/**
 * Whether `earlier`, a rule with no where conditions, matches every call `later` could: first match wins, so `later`
 * never applies. Its toolName names all (none), the tool (`tool.*`) or the action of `later`'s, and its riskLevel
 * (if any) is `later`'s or that of every catalog action `later` names.
 */
function shadows(earlier: PolicyRule, later: PolicyRule, known: KnownTools): boolean {
  const wide = earlier.match ?? {};
  const narrow = later.match ?? {};
  if (wide.toolName !== undefined) {
    if (narrow.toolName === undefined) return false;
    const covered = wide.toolName.endsWith('.*') ? narrow.toolName.split('.', 1)[0] === wide.toolName.slice(0, -2) : narrow.toolName === wide.toolName;
    if (!covered) return false;
  }
  if (wide.riskLevel === undefined || narrow.riskLevel === wide.riskLevel) return true;
  if (narrow.riskLevel !== undefined || !known.risksOf) return false;
  const risks = known.risksOf(narrow.toolName);
  return risks.length > 0 && risks.every((r) => r === wide.riskLevel);
}

function shadowed(index: number, id: string): string {
  const by = `rules[${index}] (${JSON.stringify(id)})`;
  return `can never match: ${by} comes first, has no where conditions and matches every call this rule could (the first matching rule wins); put this rule before it, or narrow rules[${index}]`;
}

function checkRule(raw: unknown, fail: Fail, known: KnownTools | undefined): PolicyRule | null {
  if (!isRecord(raw)) {
    fail('must be an object');
    return null;
  }
  let ok = rejectUnknown(raw, RULE_FIELDS, '', fail);
  const [id, match, decision, riskLevel, reason] = ownValues(raw, ['id', 'match', 'decision', 'riskLevel', 'reason']);
  if (typeof id !== 'string' || !RULE_ID_PATTERN.test(id)) {
    ok = false;
    fail(`id must be a string of 1-${POLICY_LIMITS.maxIdLength} characters from A-Z a-z 0-9 _ . : -`);
  }
  if (!oneOf(POLICY_DECISIONS, decision)) ok = failWith(fail, `decision must be one of ${POLICY_DECISIONS.join(', ')}`);
  if (riskLevel !== undefined && !oneOf(RISK_LEVELS, riskLevel)) {
    ok = failWith(fail, `riskLevel must be one of ${RISK_LEVELS.join(', ')}`);
  }
  if (reason !== undefined && (typeof reason !== 'string' || codePoints(reason) > POLICY_LIMITS.maxReasonLength)) {
    ok = failWith(fail, `reason must be a string of at most ${POLICY_LIMITS.maxReasonLength} characters`);
  }
  const checkedMatch = match === undefined ? undefined : checkMatch(match, fail, known);
  if (!ok || checkedMatch === null) return null;
  const rule: PolicyRule = { id: id as string, decision: decision as PolicyRule['decision'] };
  if (checkedMatch !== undefined) rule.match = checkedMatch;
  if (riskLevel !== undefined) rule.riskLevel = riskLevel as PolicyRule['riskLevel'];
  if (reason !== undefined) rule.reason = reason as string;
  return rule;
}

function checkMatch(raw: unknown, fail: Fail, known: KnownTools | undefined): PolicyRuleMatch | null {
  if (!isRecord(raw)) {
    fail('match must be an object');
    return null;
  }
  let ok = rejectUnknown(raw, MATCH_FIELDS, 'match.', fail);
  const [toolName, riskLevel, where] = ownValues(raw, ['toolName', 'riskLevel', 'where']);
  let params: ParamNames | undefined;
  let toolNameOk = false;
  if (toolName !== undefined && (typeof toolName !== 'string' || !TOOL_NAME_PATTERN.test(toolName))) {
    ok = failWith(fail, 'match.toolName must look like "tool.action" or "tool.*"');
  } else if (typeof toolName === 'string' && known && !(toolName.endsWith('.*') ? known.isTool(toolName.slice(0, -2)) : known.has(toolName))) {
    // Names are matched exactly: a misspelt one would never apply, and a block rule would fail open unnoticed.
    ok = failWith(fail, notInCatalog(toolName, known));
  } else {
    toolNameOk = true;
    params = known?.paramsOf?.(toolName as string | undefined);
  }
  let riskLevelOk = riskLevel === undefined || oneOf(RISK_LEVELS, riskLevel);
  if (!riskLevelOk) ok = failWith(fail, `match.riskLevel must be one of ${RISK_LEVELS.join(', ')}`);
  else if (toolNameOk && riskLevel !== undefined && known?.risksOf) {
    // Compared with the catalog's risk of the call's action: a level none of the named actions has never matches.
    const risks = known.risksOf(toolName as string | undefined);
    if (!risks.includes(riskLevel as RiskLevel)) {
      riskLevelOk = false;
      const name = toolName as string | undefined;
      const what = name === undefined ? 'catalog actions are' : name.endsWith('.*') ? `${name.slice(0, -2)} actions are` : `${name} is`;
      ok = failWith(fail, `match.riskLevel "${riskLevel as string}" can never match: ${what} ${risks.join(', ') || 'none'} in the catalog`);
    }
  }
  // Values are judged against the actions the rule applies to: only once what picks them is sound.
  const valueProblem = toolNameOk && riskLevelOk ? known?.valueProblem : undefined;
  const scope: RuleScope = { toolName: toolName as string | undefined, riskLevel: riskLevel as RuleScope['riskLevel'] };
  const conditions: PolicyCondition[] = [];
  if (where !== undefined) {
    if (!Array.isArray(where)) {
      ok = failWith(fail, 'match.where must be an array');
    } else if (where.length > POLICY_LIMITS.maxConditionsPerRule) {
      ok = failWith(fail, `match.where holds at most ${POLICY_LIMITS.maxConditionsPerRule} conditions (got ${where.length})`);
    } else {
      let without: readonly string[] = [];
      let held: 'required' | 'default' | null = null;
      where.forEach((item: unknown, j) => {
        const condition = checkCondition(item, `where[${j}]`, fail);
        if (condition === null) ok = false;
        else if (params && !takesParam(params, condition.path)) ok = failWith(fail, notAParam(`where[${j}]`, condition.path, toolName as string | undefined, params));
        // exists:false and ne hold for a call without the param: vacuous, but they never make a rule fail open.
        else if (toolNameOk && riskLevelOk && !holdsWhenAbsent(condition) && known?.pathAbsent?.(scope, condition.path)) ok = failWith(fail, neverPresent(`where[${j}]`, condition.path, scope));
        else if (toolNameOk && riskLevelOk && unguardedComparison(where, j, condition) && (without = known?.actionsWithout?.(scope, condition.path) ?? []).length > 0) {
          ok = failWith(fail, blocksWhereAbsent(`where[${j}]`, condition, without));
        } else if (toolNameOk && riskLevelOk && COMPARISONS.includes(condition.op) && (without = reachedNeverNumeric(known, scope, condition.path, conditions)).length > 0) {
          ok = failWith(fail, neverNumeric(`where[${j}]`, condition, without));
        } else if (toolNameOk && riskLevelOk && condition.op === 'exists' && condition.value === false && (held = known?.alwaysHeld?.(scope, condition.path) ?? null) !== null) {
          ok = failWith(fail, alwaysHeld(`where[${j}]`, condition.path, scope, held));
        } else {
          const problems = valueProblem ? neverMatched(condition, `where[${j}]`, scope, valueProblem) : [];
          for (const problem of problems) ok = failWith(fail, problem);
          // A value no call can carry is named first: guarded or not, the condition would never work as written.
          const unseen = problems.length === 0 && toolNameOk && riskLevelOk && unguardedEquality(where, j, condition) ? (known?.unseenDefaults?.(scope, condition.path) ?? []) : [];
          if (unseen.length > 0) ok = failWith(fail, judgedWithoutDefault(`where[${j}]`, condition, unseen));
          if (problems.length === 0 && unseen.length === 0) conditions.push(condition);
        }
      });
    }
  }
  if (!ok) return null;
  const out: PolicyRuleMatch = {};
  if (toolName !== undefined) out.toolName = toolName as string;
  if (riskLevel !== undefined) out.riskLevel = riskLevel as PolicyRuleMatch['riskLevel'];
  if (where !== undefined) out.where = conditions;
  return out;
}

function checkCondition(raw: unknown, at: string, fail: Fail): PolicyCondition | null {
  if (!isRecord(raw)) {
    fail(`${at} must be an object`);
    return null;
  }
  let ok = rejectUnknown(raw, CONDITION_FIELDS, `${at}.`, fail);
  const [path, op, value] = ownValues(raw, ['path', 'op', 'value']);
  const hasValue = Object.hasOwn(raw, 'value');
  const pathProblem = checkPath(path);
  if (pathProblem !== null) ok = failWith(fail, `${at}.path ${pathProblem}`);
  if (!oneOf(CONDITION_OPS, op)) {
    fail(`${at}.op must be one of ${CONDITION_OPS.join(', ')}`);
    return null;
  }
  const valueProblem = checkValue(op, hasValue, value);
  if (valueProblem !== null) ok = failWith(fail, `${at}.value ${valueProblem}`);
  if (!ok) return null;
  const condition: PolicyCondition = { path: path as string, op };
  // A JSON round trip copies the value with no shared references and own-property-only keys.
  if (hasValue) condition.value = JSON.parse(JSON.stringify(value)) as unknown;
  return condition;
}

/**
 * Params are matched exactly too: a path no matched action takes is never present, so `eq` and `in` never
 * hold and a block rule on a misspelt param (orderID for orderId) fails open just as a misspelt toolName would.
 */
function takesParam(params: ParamNames, path: string): boolean {
  return params.open || params.names.has(path.split('.', 1)[0]);
}

/**
 * A path or toolName is named back only when every segment looks like a field name: an admin who pastes a token
 * where a name belongs must not see it repeated in the 400 (and the logs). Otherwise the 400 names the position
 * and lists the names that would do (they are the catalog's, never secrets).
 */
function isEchoablePath(path: string): boolean {
  return path.split('.').every(isEchoableFieldName);
}

function notAParam(at: string, path: string, toolName: string | undefined, params: ParamNames): string {
  const first = path.split('.', 1)[0];
  const listed = [...params.names].sort().join(', ');
  const what = !isEchoablePath(path)
    ? `${at}.path (${NOT_NAMED})`
    : first === path
      ? `${at}.path ${JSON.stringify(path)}`
      : `${at}.path ${JSON.stringify(path)}: ${JSON.stringify(first)}`;
  const known = isEchoablePath(path) ? 'GET /v1/tools lists them' : listed === '' ? 'they take none' : `their params: ${listed}`;
  if (toolName === undefined) return `${what} is not a param of any catalog action (${known})`;
  if (toolName.endsWith('.*')) return `${what} is not a param of any ${toolName.slice(0, -2)} action (${known})`;
  return `${what} is not a param of ${toolName} (${listed === '' ? 'it takes none' : `its params: ${listed}`})`;
}

/** Whether the condition holds for a call that does not have its path (exists:false, ne). */
function holdsWhenAbsent(condition: PolicyCondition): boolean {
  return (condition.op === 'exists' && condition.value === false) || condition.op === 'ne';
}

const COMPARISONS: readonly string[] = ['gt', 'gte', 'lt', 'lte'];

/**
 * The actions the rule applies to whose calls never hold a number at the path, among those the comparison is reached
 * for: an earlier condition that is false for a call without its path (any but exists:false and ne) stops the rule
 * before it for the actions that never take that path (a `currency` condition keeps an org-wide rule from Amazon's
 * order ids).
 */
function reachedNeverNumeric(known: KnownTools | undefined, scope: RuleScope, path: string, earlier: readonly PolicyCondition[]): readonly string[] {
  const never = known?.actionsNeverNumeric?.(scope, path) ?? [];
  if (never.length === 0) return never;
  const stopped = new Set(earlier.filter((c) => !holdsWhenAbsent(c)).flatMap((c) => known?.actionsWithout?.(scope, c.path) ?? []));
  return never.filter((action) => !stopped.has(action));
}

/**
 * A comparison the engine cannot evaluate on a call without the param, so the rule blocks it (fail closed), and
 * no earlier `exists` condition on the same path stops the rule first.
 */
function unguardedComparison(where: readonly unknown[], j: number, condition: PolicyCondition): boolean {
  if (!COMPARISONS.includes(condition.op)) return false;
  return !existsBefore(where, j, condition.path, (value) => value === undefined || value === true);
}

/** Whether an `exists` condition on `path` whose value `counts` comes before where[j]. */
function existsBefore(where: readonly unknown[], j: number, path: string, counts: (value: unknown) => boolean): boolean {
  return where.slice(0, j).some((c) => isRecord(c) && c.path === path && c.op === 'exists' && counts(c.value));
}

/**
 * An eq, ne or in with no earlier `exists` condition on the same path (true or false: either says which calls the
 * rule is for). On a call that leaves the param out, eq and in are false and ne is true (policy.engine.ts), which
 * is what the call means only when leaving the param out means having none. gt/gte/lt/lte need no such check here:
 * on a call without the param they block it (fail closed), and unguardedComparison and neverNumeric judge them.
 */
function unguardedEquality(where: readonly unknown[], j: number, condition: PolicyCondition): boolean {
  if (condition.op !== 'eq' && condition.op !== 'ne' && condition.op !== 'in') return false;
  return !existsBefore(where, j, condition.path, (value) => value === undefined || typeof value === 'boolean');
}

/**
 * An unguarded eq, ne or in on a param whose absence stands for a value the gateway learns only after the policy ran
 * (the order's currency from Shopify, the account of the org's credentials): the policy judges such a call as if it
 * had no value there while the vendor acts on one, so a block on `currency eq USD` is walked around by leaving
 * currency out, and an allow on `currency ne USD` lets the USD refund through. An exists condition first splits the
 * calls that name the param from those that leave it out, each decided knowingly.
 */
function judgedWithoutDefault(at: string, condition: PolicyCondition, defaults: readonly UnseenDefault[]): string {
  const named = isEchoablePath(condition.path);
  const what = named ? `${at}.path ${JSON.stringify(condition.path)}` : `${at}.path (${NOT_NAMED})`;
  // The first segment is the catalog's param name (never the admin's own text), so it can always be named.
  const param = condition.path.split('.', 1)[0];
  const sorted = [...defaults].sort((a, b) => (a.action < b.action ? -1 : a.action > b.action ? 1 : 0));
  const byMeaning = new Map<string, string[]>();
  for (const d of sorted) byMeaning.set(d.meaning, [...(byMeaning.get(d.meaning) ?? []), d.action]);
  const actions = listed(sorted.map((d) => d.action));
  const meanings = [...byMeaning];
  const absent =
    meanings.length === 1
      ? `left out, ${meanings[0][0]}, which the policy cannot see`
      : `the policy cannot see what stands for it then (${meanings.map(([meaning, of]) => `${listed(of)}: left out, ${meaning}`).join('; ')})`;
  const guard = named ? `{"path": ${JSON.stringify(condition.path)}, "op": "exists"}` : 'an "exists" condition on the same path';
  const guardAbsent = named ? `{"path": ${JSON.stringify(condition.path)}, "op": "exists", "value": false}` : 'an "exists" condition with value false on the same path';
  return (
    `${what} is compared (${condition.op}) but a call of ${actions} may leave ${param} out, and ${absent}: ` +
    `the rule would judge such a call as if it had no ${param} (eq and in never hold, ne always does), though the vendor acts on one; ` +
    `put ${guard} before it so the rule is for calls that name ${param}, and a separate rule with ${guardAbsent} for those that leave it out`
  );
}

/**
 * A comparison on a param some of the rule's actions never take: each of their calls would be blocked ("could not
 * be evaluated") whatever the rule decides, an outage a rule written for refunds must not cause to every other tool.
 */
function blocksWhereAbsent(at: string, condition: PolicyCondition, actions: readonly string[]): string {
  const named = isEchoablePath(condition.path);
  const what = named ? `${at}.path ${JSON.stringify(condition.path)}` : `${at}.path (${NOT_NAMED})`;
  const guard = named ? `{"path": ${JSON.stringify(condition.path)}, "op": "exists"}` : 'an "exists" condition on the same path';
  return (
    `${what} is compared (${condition.op}) but is never present in a call of ${listed(actions)}: ` +
    `the rule could not be evaluated for those calls and would block them; narrow match.toolName, or put ${guard} before it`
  );
}

/**
 * A comparison on a param some of the rule's actions take but never as a number (a boolean, an object, a text no
 * decimal passes: an order id of 3-7-7 digits, a currency code): it could not be evaluated for their calls, which it
 * would block whatever the rule decides (an allow rule too), and no exists guard helps.
 */
function neverNumeric(at: string, condition: PolicyCondition, actions: readonly string[]): string {
  const what = isEchoablePath(condition.path) ? `${at}.path ${JSON.stringify(condition.path)}` : `${at}.path (${NOT_NAMED})`;
  return (
    `${what} is compared (${condition.op}) but never holds a number or a decimal text in a call of ${listed(actions)} ` +
    '(GET /v1/tools lists their input schemas): the rule could not be evaluated for those calls and would block them, whatever its decision'
  );
}

/** exists:false on a path every call the rule applies to holds once the gateway filled in its defaults: it never matches. */
function alwaysHeld(at: string, path: string, scope: RuleScope, why: 'required' | 'default'): string {
  const what = isEchoablePath(path) ? `${at}.path ${JSON.stringify(path)}` : `${at}.path (${NOT_NAMED})`;
  const of = scope.toolName === undefined ? 'any catalog action' : scope.toolName.endsWith('.*') ? `any ${scope.toolName.slice(0, -2)} action` : scope.toolName;
  const reason = why === 'default' ? 'left out, it is filled in with its default before the policy runs' : 'it is required';
  const risk = scope.riskLevel === undefined ? '' : ` of risk ${scope.riskLevel}`;
  return `${what} always holds a value in every call of ${of}${risk} (${reason}): exists false never holds, so the rule would never apply`;
}

function listed(actions: readonly string[]): string {
  return actions.length > 5 ? `${actions.slice(0, 5).join(', ')} and ${actions.length - 5} more` : actions.join(', ');
}

/** A path no call the rule applies to can hold (a param only actions of another risk take, a field below a text param). */
function neverPresent(at: string, path: string, scope: RuleScope): string {
  const what = isEchoablePath(path) ? `${at}.path ${JSON.stringify(path)}` : `${at}.path (${NOT_NAMED})`;
  const of = scope.toolName === undefined ? 'any catalog action' : scope.toolName.endsWith('.*') ? `any ${scope.toolName.slice(0, -2)} action` : scope.toolName;
  return `${what} is never present in a call of ${of}${scope.riskLevel === undefined ? '' : ` of risk ${scope.riskLevel}`} (GET /v1/tools lists their input schemas)`;
}

function notInCatalog(toolName: string, known: KnownTools): string {
  const wildcard = toolName.endsWith('.*');
  const what = wildcard ? 'tool' : 'tool action';
  const [tool = '', action = ''] = toolName.split('.');
  if (isEchoableFieldName(tool) && (wildcard || isEchoableFieldName(action))) {
    return `match.toolName ${JSON.stringify(toolName)} names no ${what} of the catalog (GET /v1/tools lists them)`;
  }
  const tools = known.list?.();
  const names = tools === undefined ? 'GET /v1/tools lists them' : `it has: ${tools.flatMap((t) => (wildcard ? [`${t.name}.*`] : t.actions.map((a) => `${t.name}.${a.name}`))).sort().join(', ')}`;
  return `match.toolName (${NOT_NAMED}) names no ${what} of the catalog (${names})`;
}

/**
 * An eq, ne or in value no call the rule applies to can carry: eq and in would never hold (a block would fail
 * open unnoticed), ne always. Named by position; the value itself is never repeated (it may be a secret).
 */
function neverMatched(condition: PolicyCondition, at: string, scope: RuleScope, problemOf: RuleValueProblem): string[] {
  if (condition.op !== 'eq' && condition.op !== 'ne' && condition.op !== 'in') return [];
  // Judged with the catalog only, as every value here (a PUT): saved rules are read as they are, and one refused
  // there would fail the org's whole policy closed.
  if (condition.op === 'in' && (condition.value as unknown[]).length === 0) return [`${at}.value must hold at least one value for in (an empty list holds for no call)`];
  const param = isEchoablePath(condition.path) ? condition.path : `${at}.path`;
  const check = (value: unknown, where: string): string[] => {
    const why = problemOf(scope, condition.path, value);
    return why === null ? [] : [`${where} can never match ${param}: ${why}`];
  };
  if (condition.op === 'in') return (condition.value as unknown[]).flatMap((value, k) => check(value, `${at}.value[${k}]`));
  return check(condition.value, `${at}.value`);
}

function checkPath(path: unknown): string | null {
  if (typeof path !== 'string' || path === '' || path.length > POLICY_LIMITS.maxPathLength) {
    return `must be a dot path of 1-${POLICY_LIMITS.maxPathLength} characters`;
  }
  const segments = path.split('.');
  if (segments.length > POLICY_LIMITS.maxPathSegments) return `has more than ${POLICY_LIMITS.maxPathSegments} segments`;
  for (const segment of segments) {
    if (FORBIDDEN_PATH_SEGMENTS.has(segment)) return `may not contain the segment "${segment}"`;
    if (!PATH_SEGMENT_PATTERN.test(segment)) return 'segments must be non-empty and use only A-Z a-z 0-9 _ $ -';
  }
  return null;
}

function checkValue(op: ConditionOp, hasValue: boolean, value: unknown): string | null {
  if (op === 'exists') return !hasValue || typeof value === 'boolean' ? null : 'must be a boolean for exists (or left out)';
  if (!hasValue) return `is required for ${op}`;
  if (NUMERIC_OPS.includes(op)) {
    return parseDecimal(value) === null ? `must be a finite number or a decimal string for ${op}` : null;
  }
  if (op === 'in') {
    if (!Array.isArray(value)) return 'must be an array for in';
    if (value.length > POLICY_LIMITS.maxInValues) return `holds at most ${POLICY_LIMITS.maxInValues} items for in`;
  }
  return isJsonValue(value, 0) ? null : `must be JSON data nested at most ${POLICY_LIMITS.maxValueDepth} levels`;
}

function isJsonValue(value: unknown, depth: number): boolean {
  if (depth > POLICY_LIMITS.maxValueDepth) return false;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (Array.isArray(value)) return value.every((item: unknown) => isJsonValue(item, depth + 1));
  if (!isRecord(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return false;
  return Object.values(value).every((item) => isJsonValue(item, depth + 1));
}

function rejectUnknown(raw: Record<string, unknown>, allowed: ReadonlySet<string>, prefix: string, fail: Fail): boolean {
  const unknown = Object.keys(raw).filter((key) => !allowed.has(key));
  // A misspelt field is named (the fix is obvious then); a key that is no identifier may be a value pasted as a key
  // (a token, an address) and is only counted, never echoed into the 400.
  const named = unknown.filter(isEchoableFieldName);
  for (const key of named.slice(0, 5)) fail(`unknown field ${prefix}${JSON.stringify(key)}`);
  if (named.length < unknown.length) {
    const holder = prefix === '' ? 'has' : `${prefix.slice(0, -1)} has`;
    fail(`${holder} an unknown field, not named as it does not look like a field name; allowed: ${[...allowed].join(', ')}`);
  }
  return unknown.length === 0;
}

/** Reads own properties only, so nothing inherited (or planted on a prototype) is taken for input. */
function ownValues(raw: Record<string, unknown>, keys: readonly string[]): unknown[] {
  return keys.map((key) => (Object.hasOwn(raw, key) ? raw[key] : undefined));
}

function failWith(fail: Fail, message: string): false {
  fail(message);
  return false;
}

function oneOf<T extends string>(allowed: readonly T[], value: unknown): value is T {
  return typeof value === 'string' && (allowed as readonly string[]).includes(value);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
