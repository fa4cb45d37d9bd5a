/**
 * Every event type the gateway writes to the ledger: GET /v1/ledger/events filters on one of them (a misspelt or
 * guessed type would answer an empty page, which reads as "nothing happened"). ledger-event-types.spec.ts checks
 * that every type written in src/ is here.
 */
export const LEDGER_EVENT_TYPES = [
  'org.created',
  'feature_flag.changed',
  'tool_permissions.changed',
  'policy.changed',
  'credentials.updated',
  'credentials.deleted',
  'credentials.rotated',
  'api_key.created',
  'api_key.revoked',
  'run.created',
  'run.completed',
  'run.cancelled',
  'tool_call.requested',
  'tool_call.blocked',
  'tool_call.approval_requested',
  'tool_call.approved',
  'tool_call.rejected',
  'tool_call.started',
  'tool_call.retried',
  'tool_call.succeeded',
  'tool_call.failed',
  'tool_call.indeterminate',
  'tool_call.outcome_after_sweep',
  'tool_call.reconciled',
] as const;
