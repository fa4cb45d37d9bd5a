import { AppError } from './app-error.js';
import type { ErrorCode } from './error-codes.js';

/**
 * How to find the tool_use id of the block a route answers (echoableToolUseId), kept with its response: a problem
 * answered to it (sendProblem) then carries the model's tool_result, whether the route threw an AppError or anything
 * else (a database error at the intent, an unexpected one). Read only when a problem is answered: a call answered
 * with its body (nearly all) pays one WeakMap entry, not a second look at its id.
 */
const toolUseIds = new WeakMap<object, () => string | null>();

export function rememberToolUseId(res: object, toolUseId: () => string | null): void {
  toolUseIds.set(res, toolUseId);
}

export function toolUseIdOf(res: object): string | null {
  return toolUseIds.get(res)?.() ?? null;
}

/** Nothing was sent to a vendor for the call: said to the model as such. */
const NOT_RUN = 'This action was not run';
const LATER = 'It can be tried again shortly.';

/** What the model is told for a problem answered to its tool_use (no ledger row, or none shown): fixed wording, no value of the call. */
function problemContent(e: AppError): string {
  const hasCall = typeof e.extra.fields?.toolCallId === 'string';
  const byCode: Partial<Record<ErrorCode, string>> = {
    IDEMPOTENCY_IN_PROGRESS:
      'This action has not finished yet: it is still in progress, or it waits for an earlier action of the same request that has not finished (which may be waiting for a human approval). Nothing new was done for it now.',
    IDEMPOTENCY_KEY_REUSED: `${NOT_RUN}: its id was already used for a different action.`,
    RUN_NOT_ACTIVE: `${NOT_RUN}: the session it belongs to has ended.`,
    RATE_LIMITED: `${NOT_RUN}: too many actions were asked for at once. ${LATER}`,
    CONCURRENCY_LIMIT: `${NOT_RUN}: too many actions are in progress at this service. ${LATER}`,
    GATEWAY_STOPPING: `${NOT_RUN}: the tool service is restarting. ${LATER}`,
    // Without a call named, a fresh action was not run, but a resent one (read from the ledger) may have been earlier.
    DATABASE_UNAVAILABLE: hasCall
      ? 'This action was started, but its outcome could not be recorded yet: it is not known whether it took effect. Do not assume it failed, and do not send a different action in its place.'
      : 'This action could not be handled: the tool service is unavailable right now. If this same action was requested before, it may already have run; otherwise it was not run. It can be tried again shortly.',
  };
  const known = byCode[e.code];
  if (known !== undefined) return known;
  if (e.status >= 400 && e.status < 500) return `${NOT_RUN}: the tool service refused the request for it (${e.code}).`;
  return `The tool service could not answer for this action (${e.code}); it is not known whether it ran.`;
}

/**
 * `e` with the model's tool_result for it (`toolUseId`, `toolResult`, problem extension members): Anthropic's Messages
 * API refuses a turn in which a tool_use has no tool_result, and a batch item held behind a write waiting for approval,
 * or a call refused 409, 422 or 429 with no ledger row, gave the runtime nothing to hand the model.
 */
export function withToolResult(e: AppError, toolUseId: string | null): AppError {
  if (toolUseId === null || e.extra.fields?.toolResult !== undefined) return e;
  const toolResult = { type: 'tool_result', tool_use_id: toolUseId, content: problemContent(e), is_error: true };
  return new AppError(e.code, e.detail, { ...e.extra, fields: { ...e.extra.fields, toolUseId, toolResult } });
}
