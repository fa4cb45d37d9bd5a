/**
 * What binds the approval an expert or client reviews to the call that runs. The reviewer is shown the approval
 * row (tool_name, action, input_redacted, action_digest); what runs is the call row's tool and action with the
 * encrypted approved input (tool_call_inputs, authenticated to the call). Those columns are not chained: a row
 * rewritten around the gateway (the amount shown as 1.00 of a 40.00 refund) would be approved as shown and run as
 * stored. So the decision (approve) and the runner check that the approval row names the call row's tool, action,
 * redacted input and digest (written alike by the intent statement, never updated), and verify (tool-call-check.ts)
 * compares the two rows. Not the approved input redacted again: redaction improves between releases, and an approval
 * pending across a deploy must stay approvable; nor its digest recomputed: the digest is over the params as sent, the
 * stored input has their defaults spelled out. Both rows rewritten alike is not caught here.
 */

/** SQL (over `a` approval_requests, `t` tool_calls): the approval row shows the call row's tool, action, input and digest. */
export const APPROVAL_ROW_AGREES_SQL = `(a.tool_name IS NOT DISTINCT FROM t.tool_name AND a.action IS NOT DISTINCT FROM t.action
  AND a.action_digest IS NOT DISTINCT FROM t.action_digest AND a.input_redacted IS NOT DISTINCT FROM t.input_redacted)`;

/** The problem text a refused decision and a not-executed approved call give. */
export const APPROVAL_NOT_BOUND = 'the approval shown is not the action awaiting approval: its row differs from the call\'s';
