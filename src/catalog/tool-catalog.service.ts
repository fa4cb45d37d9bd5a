import { Injectable } from '@nestjs/common';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { paramNamesIndex, type ParamNames, type ParamNamesOf } from '../policy/policy-param-names.js';
import type { PolicyEvaluationInput } from '../policy/policy.types.js';
import type { ToolActionSpec, ToolSpec, VendorHandler, VendorKey } from '../vendors/vendor-handler.js';
import { VendorRegistry } from '../vendors/vendor-registry.js';
import { inlineModelName, MESSAGE_NAME_MAX, redactedModelText, redactedParamMessage } from './model-text.js';
import { loneSurrogatePath } from './well-formed-params.js';

export interface CatalogEntry {
  tool: ToolSpec;
  action: ToolActionSpec;
  vendor: VendorKey;
  handler: VendorHandler;
  /** "tool.action" */
  key: string;
}

export type ParamCheck = { ok: true } | { ok: false; message: string };

/** What the policy engine reads of the catalog to compare a rule's values with one call's params. */
export type PolicyParamFacts = Pick<PolicyEvaluationInput, 'decimalParams' | 'pathParams' | 'textParams' | 'canonicalValue'>;

/**
 * Rule values already canonicalised, by "tool.action" and param, then value: rules are the same call after
 * call. Keyed by the value itself (its hash is kept with the string), not by a key built per comparison.
 */
const canonicalRuleValues = new Map<string, Map<string, unknown>>();
let canonicalRuleValueCount = 0;
let canonicalRuleValueChars = 0;
const CANONICAL_MEMO_MAX = 50_000;
const CANONICAL_MEMO_TEXT_MAX = 2_048;
/**
 * The memo's bound in characters (its values and their canonical forms), besides its count: 50,000 values of up to
 * 2,048 characters were some 400 MB, shared by every org. A growth reviewer's policies of long Nango paths, changed
 * again and again, kept 103 MB.
 */
export const CANONICAL_MEMO_CHARS_MAX = 4_000_000;

/** How much the canonical-value memo holds (tests). */
export const canonicalMemoSize = (): { values: number; chars: number } => ({ values: canonicalRuleValueCount, chars: canonicalRuleValueChars });

/**
 * The call's param kinds, and its vendor's canonicaliser for a rule's value: a stored rule (whatever its
 * toolName, "tool.*" or none) is spelled as the admin typed it, while the params were rewritten before the
 * policy ran (ToolCatalogService.canonicalParams), so a rule written "v1/admin/users" would never meet the
 * "/v1/admin/users" it names. Each value a rule compares goes through the handler's canonicalParam (one
 * param, not the whole call: a policy may hold thousands of values), remembered for the next call.
 */
export function policyParamFacts(entry: CatalogEntry): PolicyParamFacts {
  const { tool, action, handler } = entry;
  const canonicalParam = handler.canonicalParam?.bind(handler);
  return {
    decimalParams: action.decimalParams,
    pathParams: action.pathParams,
    textParams: action.textParams,
    canonicalValue: canonicalParam && ((param, value) => {
      if (typeof value !== 'string' || value.length > CANONICAL_MEMO_TEXT_MAX) return canonicalParam(tool.name, action.name, param, value);
      const where = `${entry.key}.${param}`;
      let known = canonicalRuleValues.get(where);
      if (known?.has(value)) return known.get(value);
      const canonical = canonicalParam(tool.name, action.name, param, value);
      const chars = value.length + (typeof canonical === 'string' ? canonical.length : 0);
      if (canonicalRuleValueCount >= CANONICAL_MEMO_MAX || canonicalRuleValueChars + chars > CANONICAL_MEMO_CHARS_MAX) {
        canonicalRuleValues.clear();
        canonicalRuleValueCount = 0;
        canonicalRuleValueChars = 0;
        known = undefined;
      }
      if (!known) canonicalRuleValues.set(where, (known = new Map()));
      known.set(value, canonical);
      canonicalRuleValueCount++;
      canonicalRuleValueChars += chars;
      return canonical;
    }),
  };
}

/**
 * An ajv error as "name: problem". The name is built from the model's input
 * (instancePath, an unexpected property), so it goes through the same redaction
 * as the keys of tool_calls.input_redacted: a card number sent as a parameter
 * name is "[REDACTED]" there and must be "[REDACTED]" here too, since this text
 * is stored as error_text, shown to ops and handed back to the model. The
 * problem is ajv's own text (built from the schema, never from the input).
 * instancePath is a JSON pointer: each key is read back as written (~1 is "/",
 * ~0 is "~") and redacted on its own, as input_redacted redacts it, before the
 * keys are joined with "." (a URL's password or a Slack webhook in a key needs
 * its "/" to be recognised, and the joined path would run it into its neighbours).
 */
function describeAjvError(e: ErrorObject): string {
  const keys = e.instancePath ? e.instancePath.slice(1).split('/').map(unescapePointerKey) : [];
  const name = (...more: string[]): string => paramName([...keys, ...more]);
  if (e.keyword === 'required') return `${name((e.params as { missingProperty: string }).missingProperty)}: is required`;
  if (e.keyword === 'additionalProperties') return `${name((e.params as { additionalProperty: string }).additionalProperty)}: is not an allowed parameter`;
  return `${keys.length ? name() : 'params'}: ${e.message ?? 'is invalid'}`;
}

/** Keys down to a param, redacted one by one and joined with "." as an ajv error's name is. */
const paramName = (keys: string[]): string => inlineModelName(keys.map(redactedKey).join('.'), MESSAGE_NAME_MAX);

/** Why a param holding a lone surrogate is refused (loneSurrogatePath), in words a model can act on. */
const HALF_A_PAIR =
  'must be well-formed text: it holds half of a UTF-16 surrogate pair (a character such as an emoji cut in two), which has no UTF-8 form and cannot be sent; send the whole character or leave it out';

/** One key of a JSON pointer as written (RFC 6901: "~1" first, then "~0", so "~01" is "~1"). */
const unescapePointerKey = (key: string): string => (key.includes('~') ? key.replace(/~1/g, '/').replace(/~0/g, '~') : key);
/** A key redacted as input_redacted redacts it; cut only by the whole name's bound. */
const redactedKey = (key: string): string => redactedModelText(key, MESSAGE_NAME_MAX);

/**
 * A param whose absence stands for an unseen value must be one a call may leave out: a misspelt or required one
 * would leave the policy check that relies on it (validatePolicyRules) silently guarding nothing.
 */
function checkUnseenDefaults(key: string, action: ToolActionSpec): void {
  const { properties, required } = action.inputSchema;
  for (const param of Object.keys(action.unseenDefaults ?? {})) {
    const declared = typeof properties === 'object' && properties !== null && Object.hasOwn(properties, param);
    if (!declared || (Array.isArray(required) && required.includes(param))) throw new Error(`${key}: unseenDefaults names ${param}, not an optional param`);
  }
}

/**
 * The catalog: every tool and action the vendors declare, with compiled JSON
 * Schema validators (ajv, strict, compiled once at start-up).
 */
@Injectable()
export class ToolCatalogService {
  private readonly entries = new Map<string, CatalogEntry>();
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly tools: ToolSpec[] = [];
  private readonly paramNames: ParamNamesOf;

  constructor(registry: VendorRegistry) {
    const ajv = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true });
    for (const handler of registry.all()) {
      for (const tool of handler.tools) {
        this.tools.push(tool);
        for (const action of tool.actions) {
          const key = `${tool.name}.${action.name}`;
          if (this.entries.has(key)) throw new Error(`duplicate catalog entry ${key}`);
          checkUnseenDefaults(key, action);
          this.entries.set(key, { tool, action, vendor: handler.vendor, handler, key });
          this.validators.set(key, ajv.compile(action.inputSchema));
        }
      }
    }
    this.paramNames = paramNamesIndex(this.tools);
  }

  /**
   * The params as their vendor spells them (`canonical`: VendorHandler.canonicalParams), and those with the defaults
   * the handler acts on spelled out (`acted`: VendorHandler.withDefaults); unknown tools' params as they are, twice.
   */
  paramSpellings(toolName: string, action: unknown, params: Record<string, unknown>): { canonical: Record<string, unknown>; acted: Record<string, unknown> } {
    const handler = typeof action === 'string' ? this.find(toolName, action)?.handler : undefined;
    const canonical = handler?.canonicalParams?.(toolName, action as string, params) ?? params;
    return { canonical, acted: handler?.withDefaults?.(toolName, action as string, canonical) ?? canonical };
  }

  list(): ToolSpec[] {
    return this.tools;
  }

  find(toolName: string, action: string): CatalogEntry | undefined {
    return this.entries.get(`${toolName}.${action}`);
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  /** A tool of the catalog (any of its actions). */
  isTool(toolName: string): boolean {
    return this.tools.some((t) => t.name === toolName);
  }

  /** The top-level params a policy rule on `toolName` ("tool.action", "tool.*", none: every action) can name. */
  paramsOf(toolName: string | undefined): ParamNames | undefined {
    return this.paramNames(toolName);
  }

  /**
   * JSON Schema first, then well-formed text (loneSurrogatePath), then the vendor's own pre-flight checks (e.g. Nango
   * path safety).
   * The message names the offending field (API.md §4) with any model-written name
   * redacted; the model gets the same text as the ledger, so a replay answers
   * exactly as the first call did and a secret the model put in a key is not
   * echoed into its transcript either.
   */
  checkParams(entry: CatalogEntry, params: Record<string, unknown>): ParamCheck {
    const validate = this.validators.get(entry.key)!;
    if (!validate(params)) return { ok: false, message: describeAjvError(validate.errors![0]) };
    const broken = loneSurrogatePath(params);
    if (broken) return { ok: false, message: `${paramName(broken)}: ${HALF_A_PAIR}` };
    const extra = entry.handler.validate?.(entry.tool.name, entry.action.name, params) ?? null;
    // Vendor messages quote the model's keys too (Nango: "query.<key>: …", "<key>: unknown parameter").
    return extra ? { ok: false, message: redactedParamMessage(extra) } : { ok: true };
  }
}
