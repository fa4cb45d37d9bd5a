import { policyParamFacts, type CatalogEntry, type ParamCheck } from '../catalog/tool-catalog.service.js';
import { evaluatePolicy } from '../policy/policy.engine.js';
import type { PolicyDecision, PolicyRule } from '../policy/policy.types.js';

/** Where the governance checks leave a call, before anything is written. */
export type Decision =
  | { status: 'blocked'; errorCode: 'FEATURE_DISABLED' | 'POLICY_BLOCKED'; entry?: CatalogEntry; policy?: PolicyDecision }
  | { status: 'blocked'; errorCode: 'NOT_IN_MANIFEST'; errorText: string; entry?: CatalogEntry; policy?: undefined }
  /** No entry when the tool is in the run but `input.action` is not a string. */
  | { status: 'failed'; errorCode: 'INVALID_INPUT'; errorText: string; entry?: CatalogEntry }
  | { status: 'waiting_approval'; entry: CatalogEntry; policy: PolicyDecision; approvalKind: 'expert' | 'client' }
  | { status: 'running'; entry: CatalogEntry; policy: PolicyDecision };

export interface DecisionInput {
  flagEnabled: boolean;
  toolName: string;
  action: unknown;
  params: Record<string, unknown>;
  allowedTools: ReadonlySet<string>;
  find: (tool: string, action: string) => CatalogEntry | undefined;
  checkParams: (entry: CatalogEntry, params: Record<string, unknown>) => ParamCheck;
  /** null when the stored rules cannot be evaluated: fail closed. */
  rules: PolicyRule[] | null;
}

/**
 * The governance steps in ARCHITECTURE.md order — flag, manifest, params,
 * policy — as one pure function, so the order is visible and testable.
 */
export function decide(i: DecisionInput): Decision {
  if (!i.flagEnabled) return { status: 'blocked', errorCode: 'FEATURE_DISABLED' };
  const entry = typeof i.action === 'string' ? i.find(i.toolName, i.action) : undefined;
  if (!entry || !i.allowedTools.has(entry.key)) {
    const permitted = actionsInRun(i.toolName, i.allowedTools, i.find);
    if (permitted.length && typeof i.action !== 'string') {
      // The tool the model was given has `action` as a required enum (tool-definitions.ts): a schema
      // violation in a tool of this run, which the model fixes by resending (422), not a refusal.
      const errorText = i.action === undefined ? `action: is required (one of: ${permitted.join(', ')})` : `action: must be one of: ${permitted.join(', ')}`;
      return { status: 'failed', errorCode: 'INVALID_INPUT', errorText };
    }
    if (!permitted.length && i.allowedTools.has(i.toolName)) {
      // The manifest's own key ("order_lookup.lookup", as allowedTools lists it) sent as the name: the tool the model
      // was given is named "order_lookup", its action an input field. Named back only because the run has it.
      const dot = i.toolName.lastIndexOf('.');
      const [tool, action] = [i.toolName.slice(0, dot), i.toolName.slice(dot + 1)];
      return { status: 'failed', errorCode: 'INVALID_INPUT', errorText: `name: "${i.toolName}" is a tool and its action: send name "${tool}" with input.action "${action}"` };
    }
    const errorText = permitted.length
      ? `this run allows only these actions of this tool: ${permitted.join(', ')}`
      : "this tool is not in this run; a run's tools are fixed when it starts, so a tool permitted since needs a new run";
    return { status: 'blocked', errorCode: 'NOT_IN_MANIFEST', errorText, entry };
  }
  const check = i.checkParams(entry, i.params);
  if (!check.ok) return { status: 'failed', errorCode: 'INVALID_INPUT', errorText: check.message, entry };
  const policy = policyFor(entry, i.params, i.rules);
  switch (policy.decision) {
    case 'block':
      return { status: 'blocked', errorCode: 'POLICY_BLOCKED', entry, policy };
    case 'require_expert_approval':
      return { status: 'waiting_approval', entry, policy, approvalKind: 'expert' };
    case 'require_client_approval':
      return { status: 'waiting_approval', entry, policy, approvalKind: 'client' };
    case 'allow':
    case 'observe':
      return { status: 'running', entry, policy };
  }
}

/**
 * The policy step: the org's rules on a catalog action's params, with the catalog's facts about them
 * (policyParamFacts); stored rules that cannot be evaluated (null) block, fail closed. Taken at submit
 * (decide) and again when an approved call is claimed (approved-call-policy.ts).
 */
export function policyFor(entry: CatalogEntry, params: Record<string, unknown>, rules: PolicyRule[] | null): PolicyDecision {
  if (rules === null) return { decision: 'block', riskLevel: entry.action.riskLevel, ruleId: null, reason: 'stored policy cannot be evaluated (fail closed)' };
  return evaluatePolicy({
    rules, toolName: entry.tool.name, action: entry.action.name, catalogRisk: entry.action.riskLevel, params,
    ...policyParamFacts(entry),
  });
}

/**
 * The actions of `toolName` that the run's manifest allows, as catalog names
 * (never the model's text: the result is quoted to the model and the ledger).
 */
export function actionsInRun(toolName: string, allowedTools: ReadonlySet<string>, find: DecisionInput['find']): string[] {
  const prefix = `${toolName}.`;
  const names: string[] = [];
  for (const key of allowedTools) {
    if (!key.startsWith(prefix)) continue;
    const entry = find(toolName, key.slice(prefix.length));
    if (entry) names.push(entry.action.name);
  }
  return names;
}
