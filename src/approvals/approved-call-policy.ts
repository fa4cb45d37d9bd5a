import type { CatalogEntry } from '../catalog/tool-catalog.service.js';
import type { PolicyDecision, PolicyRule } from '../policy/policy.types.js';
import { policyFor } from '../tool-calls/tool-call-decision.js';

/**
 * The org's current policy on an approved call, as the submit path's policy step
 * decides it (policyFor in tool-call-decision.ts, the step decide() takes), on the params that
 * were approved. The decision when it blocks, else null: an approval speaks for the
 * action, not for the rules it was judged under, so a block added since (an incident)
 * stops it, while a decision that asks for approval again is already answered.
 * Only the policy step is taken again: the claim re-reads the flag itself, the run's
 * manifest is a snapshot that held the call (API.md §3), the params were checked when
 * the call was submitted.
 */
export function policyBlockAfterApproval(entry: CatalogEntry, params: Record<string, unknown>, rules: PolicyRule[] | null): PolicyDecision | null {
  const policy = policyFor(entry, params, rules);
  return policy.decision === 'block' ? policy : null;
}
