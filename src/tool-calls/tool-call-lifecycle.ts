import { TOOL_CALL_STATUSES, type ToolCallStatus } from './tool-call-status.js';

export { TOOL_CALL_STATUSES, type ToolCallStatus };

/**
 * Every move a ToolCall may make (ARCHITECTURE.md "States"). Anything not listed
 * is a bug in the caller, never a user error, so it throws.
 *
 * - requested → failed is only for INVALID_INPUT: nothing ran, but the call was not refused either.
 * - waiting_approval / approved → blocked covers rejection and expiry, and the re-checks
 *   between approval and execution: the org's tool_calling_enabled flag, and its current
 *   policy decided again on the approved params (a block added since). Permissions are
 *   not re-checked then: the run's manifest is a snapshot taken when the run started
 *   (API.md §3), and the call was inside it.
 * - indeterminate → succeeded | failed happens only through an explicit ops reconcile (an outcome
 *   that arrives after the orphan sweep is recorded as an event for it, ToolCallLedger.writeOutcome).
 */
export const TOOL_CALL_TRANSITIONS = {
  requested: ['blocked', 'waiting_approval', 'running', 'failed'],
  waiting_approval: ['approved', 'blocked'],
  approved: ['running', 'blocked'],
  running: ['succeeded', 'failed', 'indeterminate'],
  indeterminate: ['succeeded', 'failed'],
  blocked: [],
  succeeded: [],
  failed: [],
} as const satisfies Record<ToolCallStatus, readonly ToolCallStatus[]>;

const TERMINAL: ReadonlySet<string> = new Set<ToolCallStatus>(['blocked', 'succeeded', 'failed']);
/** Settled: nothing more will happen on its own; indeterminate waits for a human, not for the gateway. */
const SETTLED: ReadonlySet<string> = new Set<ToolCallStatus>(['blocked', 'succeeded', 'failed', 'indeterminate']);

export class IllegalTransitionError extends Error {
  constructor(
    readonly from: string,
    readonly to: string,
  ) {
    super(`illegal tool call transition ${from} → ${to}`);
    this.name = 'IllegalTransitionError';
  }
}

export function isToolCallStatus(value: unknown): value is ToolCallStatus {
  return typeof value === 'string' && Object.hasOwn(TOOL_CALL_TRANSITIONS, value);
}

export function canTransition(from: ToolCallStatus, to: ToolCallStatus): boolean {
  // Statuses come back from the database as plain text: guard the lookup rather than trust the type.
  if (!isToolCallStatus(from) || !isToolCallStatus(to)) return false;
  return (TOOL_CALL_TRANSITIONS[from] as readonly ToolCallStatus[]).includes(to);
}

export function assertTransition(from: ToolCallStatus, to: ToolCallStatus): void {
  if (!canTransition(from, to)) throw new IllegalTransitionError(from, to);
}

/** Terminal statuses never change again. */
export function isTerminal(status: ToolCallStatus): boolean {
  return TERMINAL.has(status);
}

export function isSettled(status: ToolCallStatus): boolean {
  return SETTLED.has(status);
}
