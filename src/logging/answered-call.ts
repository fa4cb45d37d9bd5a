import { rememberProblemCode } from '../common/errors/answered-problem.js';

/**
 * The tool calls an answer was about, for its "request completed" line: a correlation id is the request's (a replay is
 * answered under a new one, which no ledger row holds), so the line names the call it answered (toolCallId) — and a
 * batch's line the call of each item (toolCallIds, in the order given; null for an item with no ledger row) and the
 * items refused before anything was recorded (refusedItems: their index and problem code), which leave no other
 * trace. Ids and codes only, at most one entry per item of a batch (MAX_BATCH_SIZE): never an input or a result.
 */
export interface AnsweredToolCall {
  toolCallId?: string;
  toolCallIds?: (string | null)[];
  refusedItems?: { index: number; code: string }[];
}

const answered = new WeakMap<object, AnsweredToolCall>();

export function rememberToolCall(res: object, facts: AnsweredToolCall): void {
  answered.set(res, { ...answered.get(res), ...facts });
}

export function answeredToolCall(res: object): AnsweredToolCall {
  return answered.get(res) ?? {};
}

/**
 * A tool-call body answered (POST …/tool-calls, GET …/result): its line names the call and, when the call has one,
 * its errorCode as the line's `code` — a 403 POLICY_BLOCKED told from a 403 FORBIDDEN, a 422 INVALID_INPUT, a 200
 * failed VENDOR_ERROR from a 200 succeeded — as sendProblem does for a problem answer.
 */
export function rememberToolCallAnswer(res: object, body: { toolCallId: string; errorCode: string | null }): void {
  rememberToolCall(res, { toolCallId: body.toolCallId });
  if (body.errorCode) rememberProblemCode(res, body.errorCode);
}

/** One batch's answers (tool-call bodies, or problem+json for an item with no ledger row), for the batch's line. */
export function rememberBatchAnswers(res: object, results: readonly Record<string, unknown>[]): void {
  const toolCallIds = results.map((r) => (typeof r.toolCallId === 'string' ? r.toolCallId : null));
  const refusedItems = results.flatMap((r, index) => ('toolResult' in r || typeof r.code !== 'string' ? [] : [{ index, code: r.code }]));
  rememberToolCall(res, { toolCallIds, ...(refusedItems.length > 0 ? { refusedItems } : {}) });
}
