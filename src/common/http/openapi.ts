import { applyDecorators } from '@nestjs/common';
import { ApiResponse, type OpenAPIObject } from '@nestjs/swagger';

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
    ApiResponse({
      status: 503,
      description:
        'DATABASE_UNAVAILABLE, with Retry-After. Without `toolCallId`: nothing was recorded or executed. With `toolCallId` and ' +
        '`outcomeRecorded: false`: the call was recorded and ran (the detail says whether the vendor was called), but its outcome ' +
        'could not be written yet; the gateway keeps it and retries. Send the same tool_use again (same id or Idempotency-Key) to read ' +
        'it (409 IDEMPOTENCY_IN_PROGRESS until then) — never under a new id',
      schema: PROBLEM_SCHEMA,
    }),
  );
}

/** Every documented route is authenticated; these are the errors any of them can answer (API.md §9). */
const COMMON_ERRORS: [status: string, description: string, when: (path: string, op: OpenApiOperation) => boolean][] = [
  ['400', 'VALIDATION_FAILED (or BAD_REQUEST for a body that is not JSON): a query, path or body field is invalid', (path, op) => path.includes('{') || (op.parameters?.length ?? 0) > 0 || op.requestBody !== undefined],
  ['401', 'UNAUTHENTICATED: no valid API key', () => true],
  ['403', 'FORBIDDEN: this key’s role may not call the route', () => true],
  ['404', 'NOT_FOUND: no such resource, or one of another org (indistinguishable)', (path) => path.includes('{')],
  ['413', 'PAYLOAD_TOO_LARGE', (_path, op) => op.requestBody !== undefined],
  ['415', 'UNSUPPORTED_MEDIA_TYPE: send the body as application/json', (_path, op) => op.requestBody !== undefined],
  ['429', 'RATE_LIMITED (per API key), with Retry-After', () => true],
  ['503', 'DATABASE_UNAVAILABLE, with Retry-After', () => true],
];

interface OpenApiOperation {
  parameters?: unknown[];
  requestBody?: unknown;
  responses?: Record<string, unknown>;
}

const METHODS = ['get', 'put', 'post', 'patch', 'delete'] as const;

/**
 * Adds to every operation the problem+json errors it can answer but does not
 * document itself (a route's own description of a status wins), and the
 * Problem schema they refer to.
 */
export function withProblemResponses(doc: OpenAPIObject): OpenAPIObject {
  doc.components = { ...doc.components, schemas: { ...doc.components?.schemas, Problem: PROBLEM_SCHEMA } };
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = item[method] as OpenApiOperation | undefined;
      if (!op) continue;
      const responses = (op.responses ??= {});
      for (const [status, description, applies] of COMMON_ERRORS) {
        if (responses[status] === undefined && applies(path, op)) {
          responses[status] = { description, content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } };
        }
      }
    }
  }
  return doc;
}
