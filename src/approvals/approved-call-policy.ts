import type { CatalogEntry } from '../catalog/tool-catalog.service.js';
import type { PolicyDecision, PolicyRule } from '../policy/policy.types.js';
import { policyFor } from '../tool-calls/tool-call-decision.js';
import type { ApprovalKind } from './approval-request.entity.js';

/**
 * The org's current policy on an approved call, as the submit path's policy step
 * decides it (policyFor in tool-call-decision.ts, the step decide() takes), on the params that
 * were approved. The decision when it blocks, else null: an approval speaks for the
 * action, not for the rules it was judged under, so a block added since (an incident)
 * stops it, while a decision that asks for approval again is already answered — by an
 * approval at least as strong as the one it asks for. A client approval (the org's own
 * agent may give it, API.md §9) does not answer a policy that now asks for an expert:
 * that is a block too, on the rule that asks for the expert. An expert approval answers
 * either kind. `approvalKind` null (no approval on record) answers no expert requirement.
 * Only the policy step is taken again: the claim re-reads the flag itself, the run's
 * manifest is a snapshot that held the call (API.md §3), the params were checked when
 * the call was submitted.
 */
export function policyBlockAfterApproval(
  entry: CatalogEntry,
  params: Record<string, unknown>,
  rules: PolicyRule[] | null,
  approvalKind: ApprovalKind | null,
): PolicyDecision | null {
  const policy = policyFor(entry, params, rules);
  if (policy.decision === 'block') return policy;
  if (policy.decision === 'require_expert_approval' && approvalKind !== 'expert') {
    return { decision: 'block', riskLevel: policy.riskLevel, ruleId: policy.ruleId, reason: 'policy now requires an expert approval' };
  }
  return null;
}
