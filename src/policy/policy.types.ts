/** Policy rules as admins write them (API.md §2) and the decision the engine hands the pipeline. */

export const RISK_LEVELS = ['low', 'medium', 'high'] as const;
export type RiskLevel = (typeof RISK_LEVELS)[number];

export const POLICY_DECISIONS = [
  'allow',
  'observe',
  'require_expert_approval',
  'require_client_approval',
  'block',
] as const;
export type PolicyDecisionType = (typeof POLICY_DECISIONS)[number];

export const CONDITION_OPS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'exists'] as const;
export type ConditionOp = (typeof CONDITION_OPS)[number];

/** Operators that only make sense between two numbers. */
export const NUMERIC_OPS: readonly ConditionOp[] = ['gt', 'gte', 'lt', 'lte'];

export interface PolicyCondition {
  /** Dot path into the call's params, e.g. "amount" or "address.zip"; digits index arrays ("items.0.qty"). */
  path: string;
  op: ConditionOp;
  /** Required for eq, ne, gt, gte, lt, lte, in (an array); for exists a boolean, absent meaning true. */
  value?: unknown;
}

export interface PolicyRuleMatch {
  /** "tool.action" or "tool.*" */
  toolName?: string;
  /** Compared with the catalog risk of the action. */
  riskLevel?: RiskLevel;
  /** All must hold; evaluated in order, stopping at the first that does not. */
  where?: PolicyCondition[];
}

export interface PolicyRule {
  id: string;
  match?: PolicyRuleMatch;
  decision: PolicyDecisionType;
  /** Overrides the catalog risk in the recorded decision. */
  riskLevel?: RiskLevel;
  reason?: string;
}

export interface PolicyDecision {
  decision: PolicyDecisionType;
  riskLevel: RiskLevel;
  /** null when no rule matched and the risk default applied (or when no rule could be blamed). */
  ruleId: string | null;
  reason: string;
}

export interface PolicyEvaluationInput {
  rules: readonly PolicyRule[];
  toolName: string;
  action: string;
  catalogRisk: RiskLevel;
  params: unknown;
  /**
   * Top-level params the catalog declares decimal strings (a refund's amount): eq, ne and in
   * compare them by value, so a rule value "100" also matches "100.00" and "0100" — the same
   * amount the vendor is sent. Other strings compare as text (ids like "00123" and "123" differ).
   */
  decimalParams?: readonly string[];
  /**
   * Top-level params that are URL paths (a Nango proxy path): eq, ne and in ignore one trailing "/",
   * so a rule on "/v1/admin/users" also holds for "/v1/admin/users/" (the same resource to many
   * servers, another one to some: the path itself is sent as the model gave it).
   */
  pathParams?: readonly string[];
  /**
   * Top-level params the vendor sends as text, members included (a Nango query: false and "false" are both
   * ?dryRun=false): eq, ne and in also hold there between two values of the same text, so a rule on false
   * also holds for "false".
   */
  textParams?: readonly string[];
  /**
   * A rule's value for a top-level param, in the one spelling the call's params were rewritten into before
   * the policy ran (VendorHandler.canonicalParams): eq, ne and in compare that, so a rule written
   * "v1/admin/users" holds for the "/v1/admin/users" the call became. Absent: values compare as written.
   */
  canonicalValue?: (param: string, value: unknown) => unknown;
}

export const POLICY_LIMITS = {
  maxRules: 200,
  maxConditionsPerRule: 20,
  maxIdLength: 100,
  maxReasonLength: 500,
  maxPathLength: 200,
  maxPathSegments: 32,
  maxInValues: 500,
  /** Nesting allowed inside a condition value (eq against an object, say). */
  maxValueDepth: 16,
} as const;

export const RULE_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,100}$/;
/** Segments that would walk into the prototype chain were a path ever resolved naively. */
export const FORBIDDEN_PATH_SEGMENTS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);
/** Param names are identifiers; anything else in a path is a typo or an attack. */
export const PATH_SEGMENT_PATTERN = /^[A-Za-z0-9_$-]+$/;
