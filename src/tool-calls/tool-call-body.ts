import { renderForModel } from '../executor/result-budget.js';
import type { ToolCallStatus } from './tool-call-status.js';

/** The facts of a ToolCall row that shape the response. */
export interface CallFacts {
  id: string;
  status: ToolCallStatus;
  errorCode: string | null;
  errorText: string | null;
  retryAfterSeconds: number | null;
  approvalKind?: 'expert' | 'client' | null;
  /**
   * EXPERT_REJECTED / CLIENT_REJECTED: the reason the decider gave (redacted when it was written; null or absent when
   * none). It is relayed to the model, which can then change course ("offer store credit instead") rather than guess.
   */
  rejectionReason?: string | null;
  /** Settled by ops from `indeterminate` (POST /v1/tool-calls/:id/reconcile): the outcome is an operator's finding. */
  reconciled?: boolean;
  /**
   * The vendor's last HTTP status (null: no answer, or nothing sent). For VENDOR_ERROR it tells a refusal (an
   * answer below 500: a 4xx, or a 200 carrying errors such as Shopify's userErrors) from a 5xx.
   */
  vendorStatus?: number | null;
  /**
   * For VENDOR_ERROR: the vendor refused the input (true: the same input fails the same way) or failed on its side
   * or on the way (false: it may work later). Null for calls recorded before it was kept: then the status decides.
   */
  vendorRefused?: boolean | null;
}

export interface ToolCallBody {
  toolCallId: string;
  status: ToolCallStatus;
  errorCode: string | null;
  replayed: boolean;
  /** The full result, or null when there is none or it was too big for the budget (then `truncated`). */
  result: unknown;
  truncated: boolean;
  retryAfterSeconds?: number;
  toolResult: { type: 'tool_result'; tool_use_id: string; content: string; is_error: boolean };
}

/** A full result, with the JSON text it was stored as (rendering reuses it rather than serializing again). */
export type StoredResult = { found: true; value: unknown; json: string } | { found: false; unreadable?: true };

/** HTTP status for a recorded outcome (API.md §4 table). */
export function httpStatusFor(status: ToolCallStatus, errorCode: string | null): number {
  if (status === 'waiting_approval') return 202;
  if (status === 'blocked') return 403;
  if (status === 'failed' && errorCode === 'INVALID_INPUT') return 422;
  return 200;
}

/** A decider's reason as the model reads it: quoted as JSON (its quotes and line breaks escaped), nothing when none. */
function givenReason(reason: string | null | undefined): string {
  return reason?.trim() ? `, giving this reason: ${JSON.stringify(reason)}` : '';
}

/**
 * What the model reads when there is no result: plain words about what
 * happened, never vendor text, stack traces or secrets. INVALID_INPUT names the
 * field with our own validator's message.
 */
export function modelMessage(f: CallFacts): string {
  if (f.status === 'waiting_approval' || f.status === 'approved' || f.status === 'requested') {
    const who = f.approvalKind === 'client' ? 'the customer' : 'an expert';
    return f.status === 'approved'
      ? 'The action was approved and is about to run. Its result will be available shortly; do not send it again.'
      : `This action needs approval by ${who} before it can run. It has not been executed yet. Do not send it again; you will be told its outcome once it has been decided.`;
  }
  if (f.status === 'running') return 'The action is still running. Its result will be available shortly; do not send it again.';
  if (f.reconciled && f.status === 'failed') {
    // Whatever code it carries (VENDOR_ERROR, see reconcile.service.ts): an operator's finding, not a vendor answer.
    return 'It was unknown whether this action took effect; an operator has since checked with the vendor and confirmed that it did not. The action failed; you may try it again as a new tool call if it is still needed.';
  }
  switch (f.errorCode) {
    case 'FEATURE_DISABLED':
      return 'Tool calling is disabled for this organization. The action was not executed.';
    case 'NOT_IN_MANIFEST':
      // errorText: which actions of the tool this run allows (null on rows written before it was recorded).
      return `This tool or action is not available in this run${f.errorText ? ` (${f.errorText})` : ''}. The action was not executed.`;
    case 'POLICY_BLOCKED':
      return 'This action is not allowed by policy. It was not executed.';
    case 'EXPERT_REJECTED':
      return `An expert reviewed this action and rejected it${givenReason(f.rejectionReason)}. It was not executed.`;
    case 'CLIENT_REJECTED':
      return `The customer rejected this action${givenReason(f.rejectionReason)}. It was not executed.`;
    case 'APPROVAL_EXPIRED':
      return 'The approval request for this action expired before anyone decided it. It was not executed.';
    case 'APPROVAL_REVOKED':
      return 'The approval given for this action was withdrawn before it ran (the approver no longer has access). It was not executed.';
    case 'RUN_NOT_ACTIVE':
      return 'The run this action belonged to was completed or cancelled before it ran. It was not executed.';
    case 'INVALID_INPUT':
      return `The tool input is invalid (${f.errorText ?? 'see the tool schema'}). Fix the input and try again.`;
    case 'VENDOR_TIMEOUT':
      return 'The vendor did not answer in time. The action failed; you may try again later.';
    case 'VENDOR_RATE_LIMITED':
      return f.retryAfterSeconds
        ? `The vendor is limiting requests. Try again in ${f.retryAfterSeconds} seconds.`
        : 'The vendor is limiting requests. Try again later.';
    case 'VENDOR_NOT_FOUND':
      return 'The vendor has no record matching this request.';
    case 'CREDENTIALS_INVALID':
      return "The vendor rejected this organization's credentials. An administrator needs to fix them; retrying will not help.";
    case 'CREDENTIALS_NOT_FOUND':
      return 'This organization has no credentials configured for this vendor. An administrator needs to add them.';
    case 'CIRCUIT_OPEN':
      return 'The vendor is temporarily unavailable after repeated failures. Try again later.';
    case 'OUTCOME_UNKNOWN':
      // Also a call found orphaned after a crash, which may be a read: the advice covers both.
      return 'No usable answer was recorded for this request, so it is unknown whether it took effect. Do not send it again if it changes something (a refund, a note, any write): an operator will check and settle it. A lookup that changes nothing may be run again as a new tool call.';
    case 'EXECUTION_ERROR':
      // vendorRefused false: the gateway's own database failed before the request left (the executor's `local`
      // failures, and a call recorded as not sent after its intent's answer was lost); a new call may well work.
      // Otherwise a bug (or a not-sent call recorded before vendorRefused was kept).
      if (f.vendorRefused === false) return 'The gateway could not run this action because of a temporary problem on its side; nothing was sent to the vendor. It may work later, as a new tool call.';
      return 'The tool failed unexpectedly. The action was not completed.';
    default:
      // VENDOR_ERROR: a refusal (the input, or the state of the order, will not do) or a failure on the vendor's side,
      // as the executor judged it. A call recorded before that was kept: a 4xx is a refusal and a 5xx a failure, but
      // a 200 carries both (userErrors; GraphQL INTERNAL_SERVER_ERROR, an unreadable body), so it says both.
      if (f.vendorRefused === true || ((f.vendorRefused === null || f.vendorRefused === undefined) && typeof f.vendorStatus === 'number' && f.vendorStatus >= 400 && f.vendorStatus < 500)) {
        return 'The vendor refused the request, and the action failed. Sending the same input again will fail the same way: check the input (for a refund: the amount still refundable, and the order\'s currency).';
      }
      if (f.vendorRefused === false) {
        return typeof f.vendorStatus === 'number'
          ? 'The vendor failed on its side, and the action failed. It may work later, as a new tool call.'
          : 'The vendor could not be reached or gave no usable answer, and the action failed. It may work later, as a new tool call.';
      }
      if (typeof f.vendorStatus === 'number' && f.vendorStatus >= 500) return 'The vendor failed on its side, and the action failed. It may work later, as a new tool call.';
      // Nothing that tells: no answer (a network failure, or a refusal before anything was sent, recorded before the
      // executor's judgement was kept), or a 2xx.
      return 'The vendor refused the request or could not complete it, and the action failed. If it was refused, sending the same input again will fail the same way: check the input (for a refund: the amount still refundable, and the order\'s currency). After a temporary vendor failure it may work later, as a new tool call.';
  }
}

/** Refusals an administrator's change ends (the flag, the org's credentials): a later call may run, a replay cannot. */
const FIXED_BY_AN_ADMIN = new Set(['FEATURE_DISABLED', 'CREDENTIALS_INVALID', 'CREDENTIALS_NOT_FOUND']);
const RECORDED_ANSWER =
  'This is the recorded answer of an earlier call with this tool_use id, and sending it again answers the same; once the problem is fixed, the action runs only as a new tool call.';

/**
 * The tool-call body. `budgetBytes` bounds the model-facing content (toolResult.content) always; `wholeResult` (GET
 * …/result, which exists to hand out everything) keeps `result` whole even when the content was cut, where a call's
 * answer and its replays leave it out then (truncated: true).
 */
export function buildToolCallBody(
  f: CallFacts,
  result: StoredResult,
  toolUseId: string,
  replayed: boolean,
  budgetBytes: number,
  wholeResult = false,
): ToolCallBody {
  let content: string;
  let truncated = false;
  let shownResult: unknown = null;
  if (f.status === 'succeeded' && result.found) {
    const rendered = renderForModel(result.json, budgetBytes, f.id);
    content = rendered.content;
    truncated = rendered.truncated;
    shownResult = truncated && !wholeResult ? null : result.value;
  } else if (f.status === 'succeeded' && f.reconciled && !(!result.found && result.unreadable)) {
    // Its answer never came back (it was indeterminate), or came after the call was given up on and has since expired.
    content =
      'It was unknown whether this action took effect; an operator has since checked with the vendor and confirmed that it succeeded. ' +
      'No result is available for it (the vendor\'s answer did not reach the gateway in time, or is no longer stored). Do not send it again.';
  } else if (f.status === 'succeeded' && !result.found && result.unreadable) {
    content = 'The action succeeded. Its result is stored but cannot be read at the moment (an operator has been told). Do not send it again.';
  } else if (f.status === 'succeeded') {
    content = 'The action succeeded. Its full result is no longer stored (the result retention period has passed).';
  } else {
    content = modelMessage(f);
    // A replay answers what was recorded, also after an admin fixed what stopped it: said, so the same block is not
    // resent in the belief it will now run.
    if (replayed && f.errorCode !== null && FIXED_BY_AN_ADMIN.has(f.errorCode)) content += ` ${RECORDED_ANSWER}`;
  }
  return {
    toolCallId: f.id,
    status: f.status,
    errorCode: f.errorCode,
    replayed,
    result: shownResult,
    truncated,
    ...(f.retryAfterSeconds ? { retryAfterSeconds: f.retryAfterSeconds } : {}),
    toolResult: {
      type: 'tool_result',
      tool_use_id: toolUseId,
      content,
      is_error: !(f.status === 'succeeded' || f.status === 'waiting_approval' || f.status === 'approved' || f.status === 'running'),
    },
  };
}
