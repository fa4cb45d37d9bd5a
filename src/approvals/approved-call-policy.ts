import { policyParamFacts, type CatalogEntry } from '../catalog/tool-catalog.service.js';
import { evaluatePolicy } from '../policy/policy.engine.js';
import type { PolicyDecision, PolicyRule } from '../policy/policy.types.js';

/**
 * The org's current policy on an approved call, as the submit path's policy step
 * decides it (decide() in tool-call-decision.ts: the same engine, catalog facts and
 * fail-closed answer for stored rules that cannot be evaluated), on the params that
 * were approved. The decision when it blocks, else null: an approval speaks for the
 * action, not for the rules it was judged under, so a block added since (an incident)
 * stops it, while a decision that asks for approval again is already answered.
 * Only the policy step is taken again: the claim re-reads the flag itself, the run's
 * manifest is a snapshot that held the call (API.md §3), the params were checked when
 * the call was submitted.
 */
export function policyBlockAfterApproval(entry: CatalogEntry, params: Record<string, unknown>, rules: PolicyRule[] | null): PolicyDecision | null {
  const policy: PolicyDecision =
    rules === null
      ? { decision: 'block', riskLevel: entry.action.riskLevel, ruleId: null, reason: 'stored policy cannot be evaluated (fail closed)' }
      : evaluatePolicy({
          rules, toolName: entry.tool.name, action: entry.action.name, catalogRisk: entry.action.riskLevel, params,
          ...policyParamFacts(entry),
        });
  return policy.decision === 'block' ? policy : null;
}
