import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { CatalogEntry, ToolCatalogService } from '../catalog/tool-catalog.service.js';
import { isEchoableFieldName } from '../common/echoable-field-name.js';
import type { ToolSpec } from '../vendors/vendor-handler.js';
import { compareDecimals, parseDecimal, type Decimal } from './policy-decimal.js';
import { patternMayMatchDecimal } from './policy-decimal-pattern.js';
import { isRecord } from './policy-equality.js';
import type { KnownTools } from './policy-rules.validator.js';
import type { RiskLevel } from './policy.types.js';

/**
 * What a PUT checks new rules against (validatePolicyRules): the catalog's names and params, and the values
 * a call can carry.
 */
export function catalogRuleChecks(catalog: Pick<ToolCatalogService, 'has' | 'isTool' | 'paramsOf' | 'list' | 'find'>): KnownTools {
  return {
    has: (key) => catalog.has(key),
    isTool: (toolName) => catalog.isTool(toolName),
    paramsOf: (toolName) => catalog.paramsOf(toolName),
    list: () => catalog.list(),
    valueProblem: ruleValueProblems(catalog),
    risksOf: (toolName) => [...new Set(entriesOf(catalog, { toolName }).map((e) => e.action.riskLevel))].sort(),
    pathAbsent: (scope, path) => {
      const entries = entriesOf(catalog, scope);
      const segments = path.split('.');
      return entries.length > 0 && entries.every((e) => schemaAt(e.action.inputSchema, segments) === 'absent');
    },
    actionsWithout: (scope, path) => {
      const segments = path.split('.');
      return entriesOf(catalog, scope)
        .filter((e) => schemaAt(e.action.inputSchema, segments) === 'absent')
        .map((e) => e.key)
        .sort();
    },
    actionsNeverNumeric: (scope, path) => {
      const segments = path.split('.');
      return entriesOf(catalog, scope)
        .filter((e) => neverNumeric(e, segments))
        .map((e) => e.key)
        .sort();
    },
    unseenDefaults: (scope, path) => {
      const param = path.split('.', 1)[0];
      return entriesOf(catalog, scope).flatMap((e) => {
        const declared = e.action.unseenDefaults;
        return declared !== undefined && Object.hasOwn(declared, param) ? [{ action: e.key, meaning: declared[param] }] : [];
      });
    },
    alwaysHeld: (scope, path) => {
      const segments = path.split('.');
      const held = entriesOf(catalog, scope).map((e) => heldBy(e, segments));
      if (held.length === 0 || held.includes(null)) return null;
      return held.includes('default') ? 'default' : 'required';
    },
  };
}

/**
 * Whether no call of the action holds a number or a decimal text at the path, though the action takes it: the
 * engine's gt/gte/lt/lte could then never be evaluated (parseDecimal), and would block each call it is reached
 * for. Judged on the schema a call's params have passed before the policy runs, and on the default the handler
 * fills in (withDefaults); a schema this cannot judge simply (a composite one) may hold a number.
 */
function neverNumeric(entry: CatalogEntry, segments: readonly string[]): boolean {
  const reached = schemaAt(entry.action.inputSchema, segments);
  if (reached === 'absent' || reached === 'unknown') return false;
  const filled = segments.length === 1 ? defaultOf(entry, segments[0]) : undefined;
  return !mayHoldDecimal(reached) && parseDecimal(filled) === null;
}

/** Formats no decimal text is valid in (a date, an address, a UUID...). */
const NEVER_DECIMAL_FORMATS = new Set(['date-time', 'date', 'time', 'duration', 'email', 'idn-email', 'uri', 'iri', 'uuid', 'ipv4', 'ipv6']);

/** Whether some value a schema admits is a finite number or a decimal text (parseDecimal reads it). */
function mayHoldDecimal(schema: Record<string, unknown>): boolean {
  if (COMPOSITE.some((k) => Object.hasOwn(schema, k))) return true;
  if (Object.hasOwn(schema, 'const')) return parseDecimal(schema.const) !== null;
  if (Array.isArray(schema.enum)) return schema.enum.some((v: unknown) => parseDecimal(v) !== null);
  const types = typeof schema.type === 'string' ? [schema.type] : Array.isArray(schema.type) ? (schema.type as unknown[]) : null;
  if (types === null) return true;
  if (types.includes('number') || types.includes('integer')) return true;
  if (!types.includes('string')) return false; // boolean, null, object, array
  if (typeof schema.maxLength === 'number' && schema.maxLength < 1) return false;
  if (typeof schema.minLength === 'number' && schema.minLength > 100) return false; // parseDecimal reads at most 100 characters
  if (typeof schema.format === 'string' && NEVER_DECIMAL_FORMATS.has(schema.format)) return false;
  return typeof schema.pattern !== 'string' || patternMayMatchDecimal(schema.pattern);
}

/**
 * The value the handler fills in for a top-level param a call leaves out (VendorHandler.withDefaults, asked about
 * a call with no params): what the policy sees then. Undefined when it fills in none.
 */
function defaultOf(entry: CatalogEntry, param: string): unknown {
  const filled = entry.handler.withDefaults?.(entry.tool.name, entry.action.name, {});
  return filled !== undefined && Object.hasOwn(filled, param) ? filled[param] : undefined;
}

/**
 * Why every call of the action that reaches the policy holds a value (not null) at the path: 'default' when the
 * handler fills in a top-level param the call leaves out, 'required' when the schema requires each segment of it
 * (and admits no null there); null when a call may lack it. The schema is checked before the policy runs.
 */
function heldBy(entry: CatalogEntry, segments: readonly string[]): 'default' | 'required' | null {
  if (segments.length === 1) {
    const filled = defaultOf(entry, segments[0]);
    if (filled !== undefined && filled !== null) return 'default';
  }
  let node: Record<string, unknown> = entry.action.inputSchema;
  for (const segment of segments) {
    if (COMPOSITE.some((k) => Object.hasOwn(node, k)) || node.type !== 'object') return null;
    const required = Array.isArray(node.required) && node.required.includes(segment);
    const properties = node.properties;
    const listed = isRecord(properties) && Object.hasOwn(properties, segment) ? properties[segment] : undefined;
    if (!required || !isRecord(listed)) return null;
    node = listed;
  }
  return admitsNull(node) ? null : 'required';
}

function admitsNull(schema: Record<string, unknown>): boolean {
  if (COMPOSITE.some((k) => Object.hasOwn(schema, k))) return true;
  if (Object.hasOwn(schema, 'const')) return schema.const === null;
  if (Array.isArray(schema.enum)) return schema.enum.includes(null);
  if (typeof schema.type === 'string') return schema.type === 'null';
  return !Array.isArray(schema.type) || schema.type.includes('null');
}

/** What the value check reads of the catalog (ToolCatalogService has it). */
export interface RuleValueCatalog {
  list(): readonly ToolSpec[];
  find(toolName: string, action: string): CatalogEntry | undefined;
}

/** The part of a rule's match that picks the actions it applies to. */
export interface RuleScope {
  toolName?: string;
  riskLevel?: RiskLevel;
}

/**
 * Why no call a rule applies to can carry `value` at `path` (an eq/ne value, or one item of an in), or null when
 * some call may. The reason comes from the schema or the vendor's checks, never from the value itself.
 */
export type RuleValueProblem = (scope: RuleScope, path: string, value: unknown) => string | null;

/** One action's answer: it never has the param, a call may carry the value (or this cannot tell), or why not. */
type Verdict = 'absent' | 'may' | { why: string };

/** Schema keywords whose meaning a walk down `properties` would miss: a path through them is not judged. */
const COMPOSITE = ['anyOf', 'oneOf', 'allOf', 'not', 'if', '$ref', '$dynamicRef', 'patternProperties', 'unevaluatedProperties', 'dependentSchemas'];
const ARRAY_INDEX = /^(?:0|[1-9]\d*)$/;

/**
 * Rule values a call can never carry, found when the rule is saved. The engine compares a value with the call's
 * params after both were put in the vendor's one spelling, and a call's params have passed the action's schema
 * and the vendor's checks (ToolCatalogService.checkParams): a value that fails them for every action the rule
 * applies to is never equal to a param, so a block on it never applies, as silently as a misspelt param name.
 * Judged as the engine compares (policy-equality.ts): the value canonicalised (VendorHandler.canonicalParam),
 * then every spelling that compares equal to it (an amount by value, a path with or without its trailing "/",
 * a number and its decimal text, text params by their text) — one of them passing is enough. Anything this
 * cannot judge simply (a composite schema, an object holding numbers) is let through, as it was before.
 */
export function ruleValueProblems(catalog: RuleValueCatalog): RuleValueProblem {
  const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true });
  const compiled = new WeakMap<object, ValidateFunction | null>();
  const validatorOf = (schema: Record<string, unknown>): ValidateFunction | null => {
    if (!compiled.has(schema)) {
      let fn: ValidateFunction | null = null;
      try {
        fn = ajv.compile(schema);
      } catch {
        // A subschema that does not stand alone (a $ref to its root): not judged.
      }
      compiled.set(schema, fn);
    }
    return compiled.get(schema) ?? null;
  };

  const verdictOf = (entry: CatalogEntry, path: string, value: unknown): Verdict => {
    const segments = path.split('.');
    const reached = schemaAt(entry.action.inputSchema, segments);
    if (reached === 'absent' || reached === 'unknown') return reached === 'absent' ? 'absent' : 'may';
    const validate = validatorOf(reached);
    if (validate === null) return 'may';
    const topLevel = segments.length === 1;
    // As equalityAt: only a top-level param's rule value is canonicalised, and amounts and paths are compared as such.
    const canonical = topLevel ? (entry.handler.canonicalParam?.(entry.tool.name, entry.action.name, path, value) ?? value) : value;
    const candidates = spellings(canonical, {
      decimal: topLevel && (entry.action.decimalParams ?? []).includes(path),
      urlPath: topLevel && (entry.action.pathParams ?? []).includes(path),
      text: (entry.action.textParams ?? []).includes(segments[0]),
    });
    if (candidates === null) return 'may';
    let why: string | null = null;
    for (const candidate of candidates) {
      const schemaWhy = validate(candidate) ? null : describeAjvErrors(validate.errors ?? []);
      const problem = schemaWhy ?? (topLevel ? vendorProblem(entry, path, candidate) : null);
      if (problem === null) return 'may';
      why ??= problem;
    }
    return { why: why ?? 'is refused' };
  };

  return (scope, path, value) => {
    let why: string | null = null;
    for (const entry of entriesOf(catalog, scope)) {
      const verdict = verdictOf(entry, path, value);
      if (verdict === 'may') return null;
      if (verdict !== 'absent') why ??= verdict.why;
    }
    return why;
  };
}

/** The catalog actions a rule applies to, by its toolName ("tool.action", "tool.*", none) and riskLevel. */
function entriesOf(catalog: RuleValueCatalog, scope: RuleScope): CatalogEntry[] {
  const [toolName, action] = scope.toolName === undefined ? [] : scope.toolName.split('.');
  const out: CatalogEntry[] = [];
  for (const tool of catalog.list()) {
    if (toolName !== undefined && tool.name !== toolName) continue;
    for (const spec of tool.actions) {
      if (action !== undefined && action !== '*' && spec.name !== action) continue;
      if (scope.riskLevel !== undefined && spec.riskLevel !== scope.riskLevel) continue;
      const entry = catalog.find(tool.name, spec.name);
      if (entry) out.push(entry);
    }
  }
  return out;
}

const SCALAR_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null']);

/**
 * The schema of the value at a path, walking `properties` (and a plain `additionalProperties` or `items`);
 * 'absent' when no value the schema admits holds the path (a closed object not listing a segment, a segment below a
 * scalar: a text param has no `amount.value`, a Nango query value no `page.size`), 'unknown' when the walk is not
 * that simple.
 */
function schemaAt(root: Record<string, unknown>, segments: readonly string[]): Record<string, unknown> | 'absent' | 'unknown' {
  let node = root;
  for (const segment of segments) {
    if (onlyScalars(node, 0)) return 'absent';
    if (COMPOSITE.some((k) => Object.hasOwn(node, k))) return 'unknown';
    const properties = node.properties;
    const listed = isRecord(properties) && Object.hasOwn(properties, segment) ? properties[segment] : undefined;
    if (isRecord(listed)) node = listed;
    else if (listed === undefined && node.additionalProperties === false) return 'absent';
    else if (listed === undefined && isRecord(node.additionalProperties)) node = node.additionalProperties;
    else if (listed === undefined && ARRAY_INDEX.test(segment) && isRecord(node.items)) node = node.items;
    else return 'unknown';
  }
  return node;
}

/**
 * Whether every value the schema admits is a scalar: its `type` names only scalar types, or each branch of its
 * anyOf/oneOf does (a Nango query value: string, number or boolean), whatever else it says.
 */
function onlyScalars(schema: unknown, depth: number): boolean {
  if (!isRecord(schema) || depth > 8) return false;
  const types = typeof schema.type === 'string' ? [schema.type] : Array.isArray(schema.type) ? (schema.type as unknown[]) : [];
  if (types.length > 0 && types.every((t) => typeof t === 'string' && SCALAR_TYPES.has(t))) return true;
  return ['anyOf', 'oneOf'].some((k) => {
    const branches = Object.hasOwn(schema, k) ? schema[k] : undefined;
    return Array.isArray(branches) && branches.length > 0 && branches.every((b: unknown) => onlyScalars(b, depth + 1));
  });
}

interface Kinds {
  decimal: boolean;
  urlPath: boolean;
  text: boolean;
}

/** The value and the other spellings a param may have and still equal it (policy-equality.ts); null: too many to try. */
function spellings(value: unknown, kinds: Kinds): unknown[] | null {
  if (typeof value === 'object' && value !== null) return hasLooseScalar(value, kinds.text, 0) ? null : [value];
  const out: unknown[] = [value];
  const decimal = parseDecimal(value);
  if (decimal !== null) {
    // A number equals any decimal text of its value; an amount param equals any spelling of it.
    if (typeof value === 'number' || kinds.decimal) out.push(...decimalTexts(decimal));
    // A decimal text equals the number of its value.
    if (typeof value === 'string' && sameDecimal(Number(value), decimal)) out.push(Number(value));
  }
  if (kinds.urlPath && typeof value === 'string') {
    const bare = value.length > 1 && value.endsWith('/') ? value.slice(0, -1) : value;
    out.push(bare, `${bare}/`);
  }
  if (kinds.text) {
    if (typeof value === 'boolean' || typeof value === 'number') out.push(String(value));
    if (value === 'true' || value === 'false') out.push(value === 'true');
    if (typeof value === 'string' && isNumberText(value)) out.push(Number(value));
  }
  return out;
}

/** Whether an object or array holds a scalar that equals values of another type (a number, a decimal text). */
function hasLooseScalar(value: unknown, text: boolean, depth: number): boolean {
  if (depth > 64) return true;
  if (typeof value === 'number') return true;
  if (typeof value === 'string') return parseDecimal(value) !== null || (text && (value === 'true' || value === 'false' || isNumberText(value)));
  if (typeof value === 'boolean') return text;
  if (typeof value === 'object' && value !== null) return Object.values(value).some((item: unknown) => hasLooseScalar(item, text, depth + 1));
  return false;
}

/** Text that is String(n) of a finite number ("1e+21"): a text param sends that number as it. */
function isNumberText(value: string): boolean {
  return Number.isFinite(Number(value)) && String(Number(value)) === value;
}

/** "10", "10.0", "10.00", "10.000" for 10: the amount as schemas commonly take it, up to three decimals. */
function decimalTexts(d: Decimal): string[] {
  const whole = `${d.negative ? '-' : ''}${d.int === '' ? '0' : d.int}`;
  const texts: string[] = [];
  for (let places = d.frac.length; places <= Math.max(d.frac.length, 3); places++) {
    texts.push(places === 0 ? whole : `${whole}.${d.frac.padEnd(places, '0')}`);
  }
  return texts;
}

function sameDecimal(n: number, d: Decimal): boolean {
  const parsed = parseDecimal(n);
  return parsed !== null && compareDecimals(parsed, d) === 0;
}

/**
 * Ajv's problem, built from the schema (never from the value); a location inside the value only when it looks
 * like field names. Failing an anyOf, each branch's problem ("must be string or must be number").
 */
function describeAjvErrors(errors: readonly ErrorObject[]): string {
  const last = errors.at(-1);
  const alternatives = last?.keyword === 'anyOf' || last?.keyword === 'oneOf';
  const shown = alternatives ? errors.slice(0, -1).filter((e) => e.instancePath === last.instancePath) : errors.slice(0, 1);
  const problem = [...new Set(shown.map((e) => e.message ?? 'is not valid'))].join(' or ') || 'is not valid for it';
  const at = last?.instancePath ? last.instancePath.slice(1).split('/') : [];
  return at.length > 0 && at.every(isEchoableFieldName) ? `${at.join('.')} ${problem}` : problem;
}

/**
 * The vendor's own check (VendorHandler.validate) of the one param, on its own: only a message naming that param
 * counts (the others are about the params this call leaves out, a post's body say). Its name is dropped.
 */
function vendorProblem(entry: CatalogEntry, param: string, value: unknown): string | null {
  const message = entry.handler.validate?.(entry.tool.name, entry.action.name, { [param]: value }) ?? null;
  if (message === null || !message.startsWith(param)) return null;
  const rest = message.slice(param.length);
  if (rest !== '' && !/^[: ]/.test(rest)) return null;
  const why = rest.replace(/^:?\s*/, '');
  // Vendor messages name fields, not values; should one ever quote the value, it is not repeated here.
  if (typeof value === 'string' && value.length >= 4 && why.includes(value)) return 'is refused by the vendor checks';
  return why === '' ? 'is refused by the vendor checks' : why;
}
