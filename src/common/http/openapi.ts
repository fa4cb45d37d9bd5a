import { applyDecorators } from '@nestjs/common';
import { ApiResponse } from '@nestjs/swagger';

/** application/problem+json, the body of every error that has no ToolCall row (API.md §8, §9). */
export const PROBLEM_SCHEMA = {
  type: 'object',
  required: ['type', 'title', 'status', 'detail', 'code', 'correlationId'],
  properties: {
    type: { type: 'string' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
    code: { type: 'string', example: 'VALIDATION_FAILED' },
    correlationId: { type: 'string' },
    retryAfterSeconds: { type: 'integer', description: 'with 429 and 409 IDEMPOTENCY_IN_PROGRESS (also in Retry-After)' },
  },
};

/** The tool-call body (API.md §4), answered for every outcome that reached the ledger, whatever the HTTP status. */
export const TOOL_CALL_BODY_SCHEMA = {
  type: 'object',
  required: ['toolCallId', 'status', 'errorCode', 'replayed', 'result', 'truncated', 'toolResult'],
  properties: {
    toolCallId: { type: 'string', format: 'uuid' },
    status: { type: 'string', enum: ['succeeded', 'failed', 'indeterminate', 'waiting_approval', 'blocked', 'running', 'approved'] },
    errorCode: {
      type: 'string',
      nullable: true,
      enum: [
        'VENDOR_ERROR', 'VENDOR_TIMEOUT', 'VENDOR_RATE_LIMITED', 'VENDOR_NOT_FOUND', 'CREDENTIALS_INVALID', 'CIRCUIT_OPEN',
        'CREDENTIALS_NOT_FOUND', 'EXECUTION_ERROR', 'OUTCOME_UNKNOWN', 'FEATURE_DISABLED', 'NOT_IN_MANIFEST', 'POLICY_BLOCKED',
        'EXPERT_REJECTED', 'CLIENT_REJECTED', 'APPROVAL_EXPIRED', 'INVALID_INPUT',
      ],
    },
    replayed: { type: 'boolean', description: 'true when this answers a repeat of an earlier request (header Idempotent-Replayed: true)' },
    result: { description: 'the full vendor result; null when there is none, or when it exceeded the result budget (see truncated)' },
    truncated: { type: 'boolean', description: 'the model-facing content was cut to the budget; GET /v1/tool-calls/{id}/result has it all' },
    retryAfterSeconds: { type: 'integer', description: 'VENDOR_RATE_LIMITED: how long the vendor asked to wait' },
    toolResult: {
      type: 'object',
      description: 'hand this to the model as-is',
      properties: {
        type: { type: 'string', enum: ['tool_result'] },
        tool_use_id: { type: 'string' },
        content: { type: 'string', description: 'the JSON result, or a short sanitized message (never vendor text or secrets)' },
        is_error: { type: 'boolean' },
      },
    },
  },
};

/** The responses of a route that records tool calls. */
export function ApiToolCallResponses(): MethodDecorator {
  return applyDecorators(
    ApiResponse({ status: 200, description: 'succeeded, failed at the vendor, or indeterminate', schema: TOOL_CALL_BODY_SCHEMA }),
    ApiResponse({ status: 202, description: 'waiting for approval', schema: TOOL_CALL_BODY_SCHEMA }),
    ApiResponse({ status: 403, description: 'blocked (flag, manifest, policy, rejected, expired) — tool-call body; or a wrong role — problem+json', schema: TOOL_CALL_BODY_SCHEMA }),
    ApiResponse({ status: 422, description: 'INVALID_INPUT (tool-call body) or IDEMPOTENCY_KEY_REUSED (problem+json)', schema: TOOL_CALL_BODY_SCHEMA }),
    ApiResponse({ status: 400, description: 'not a tool_use block, or a bad Idempotency-Key; nothing recorded', schema: PROBLEM_SCHEMA }),
    ApiResponse({ status: 404, description: 'RUN_NOT_FOUND (also another org’s run)', schema: PROBLEM_SCHEMA }),
    ApiResponse({ status: 409, description: 'RUN_NOT_ACTIVE, or IDEMPOTENCY_IN_PROGRESS with Retry-After', schema: PROBLEM_SCHEMA }),
    ApiResponse({ status: 429, description: 'CONCURRENCY_LIMIT (org × vendor) or RATE_LIMITED (per key), with Retry-After', schema: PROBLEM_SCHEMA }),
    ApiResponse({ status: 503, description: 'DATABASE_UNAVAILABLE: nothing was executed', schema: PROBLEM_SCHEMA }),
  );
}
