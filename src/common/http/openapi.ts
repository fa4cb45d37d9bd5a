import { applyDecorators } from '@nestjs/common';
import { ApiHeader, ApiResponse, type OpenAPIObject } from '@nestjs/swagger';
import { PRECONDITION_FAILED_TEXT } from './if-match.js';
import { bodyLimitFor, MAX_JSON_DEPTH, TOOL_CALL_BODY_LIMIT } from './json-body.js';

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
    retryAfterSeconds: { type: 'integer', description: 'with 429, 503 and 409 IDEMPOTENCY_IN_PROGRESS (also in Retry-After)' },
    errors: { type: 'array', items: { type: 'string' }, description: 'VALIDATION_FAILED: one message per problem found (the detail joins them)' },
    toolCallId: {
      type: 'string',
      format: 'uuid',
      description:
        'the tool call the problem is about: on a 503 DATABASE_UNAVAILABLE, the call that was recorded and ran, but whose outcome may not be written yet; ' +
        'on a 409 IDEMPOTENCY_IN_PROGRESS, the call still running (wait for it: GET /v1/tool-calls/{id}/result); on a 422 IDEMPOTENCY_KEY_REUSED, the call of another run the key names',
    },
    outcomeConfirmed: { type: 'boolean', description: 'with toolCallId: false, the outcome may not be recorded yet; send the same tool_use again to read it' },
    toolUseId: { type: 'string', description: 'on a problem answered to a tool_use (a single call, or a batch item): its id, as toolResult names it' },
    toolResult: {
      type: 'object',
      description:
        'on a problem answered to a tool_use: the tool_result to hand the model (a turn needs one for every tool_use), is_error true, its content fixed ' +
        'wording for the model (not run, not finished yet, or outcome not known). Absent when the block had no id the gateway could take, or one holding a credential\'s shape',
      required: ['type', 'tool_use_id', 'content', 'is_error'],
      properties: {
        type: { type: 'string', enum: ['tool_result'] },
        tool_use_id: { type: 'string' },
        content: { type: 'string' },
        is_error: { type: 'boolean', enum: [true] },
      },
    },
  },
};

/** Retry-After, on every answer that carries retryAfterSeconds. */
const RETRY_AFTER_HEADER = { description: 'seconds to wait before sending it again', schema: { type: 'integer' } };

/** Idempotent-Replayed, on the tool-call body that answers a repeat of an earlier request. */
const IDEMPOTENT_REPLAYED_HEADER = {
  description: '"true" when this answers a repeat of an earlier request (the body says replayed: true); absent otherwise',
  schema: { type: 'string', enum: ['true'] },
};

/** X-Correlation-Id as a request header (correlationMiddleware): never refused, a value it cannot take is replaced. */
const CORRELATION_ID_PARAMETER = {
  name: 'X-Correlation-Id',
  in: 'header',
  required: false,
  description:
    'your id for this request, echoed on the answer and recorded on the tool calls it makes (ledger filter `correlationId`): 1-255 printable ASCII without blanks ' +
    '(`^[\\x21-\\x7e]{1,255}$`); absent or anything else, the gateway generates a UUID (the request is not refused)',
  schema: { type: 'string' },
};

/** WWW-Authenticate, on every 401 (the problem filter sets it, RFC 9110 §11.6.1): the scheme the gateway takes. */
const WWW_AUTHENTICATE_HEADER = {
  description: 'the authentication scheme: send the API key as `Authorization: Bearer <key>`',
  schema: { type: 'string', example: 'Bearer realm="tool-gateway"' },
};

/** X-Correlation-Id, echoed on every answer. */
const CORRELATION_ID_HEADER = {
  description: 'the X-Correlation-Id the request carried when it is 1-255 printable ASCII without blanks, else a fresh UUID',
  schema: { type: 'string' },
};

/** Every 503: the database is unavailable, or the gateway is stopping (README "Stopping"). */
const UNAVAILABLE =
  'GATEWAY_STOPPING, with Retry-After and Connection: close: the gateway is stopping (SIGTERM) and started nothing; send it again ' +
  '(another replica answers it). DATABASE_UNAVAILABLE, with Retry-After';

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
        'EXPERT_REJECTED', 'CLIENT_REJECTED', 'APPROVAL_EXPIRED', 'APPROVAL_REVOKED', 'INVALID_INPUT', 'RUN_NOT_ACTIVE', null,
      ],
    },
    replayed: { type: 'boolean', description: 'true when this answers a repeat of an earlier request (header Idempotent-Replayed: true)' },
    result: {
      description:
        'the full vendor result; null when there is none, or (but on GET /v1/tool-calls/{id}/result, which always has it whole) when it exceeded the result budget (see truncated)',
    },
    truncated: {
      type: 'boolean',
      description: 'the model-facing content (toolResult.content) was cut to the result budget (in a batch, or to the batch budget); GET /v1/tool-calls/{id}/result has the whole result',
    },
    retryAfterSeconds: {
      type: 'integer',
      description:
        'VENDOR_RATE_LIMITED: how long the vendor asked to wait, then make the call again as a new tool call (a new tool_use id); ' +
        'a replay or GET …/result counts it down from when the call ended and leaves it out once passed',
    },
    toolResult: {
      type: 'object',
      description: 'hand this to the model as-is',
      required: ['type', 'tool_use_id', 'content', 'is_error'],
      properties: {
        type: { type: 'string', enum: ['tool_result'] },
        tool_use_id: { type: 'string' },
        content: { type: 'string', description: "the JSON result, or a short sanitized message (never vendor text or secrets; a rejection quotes its decider's reason, as stored: redacted); a number of the vendor's answer that a double cannot hold (a 64-bit id, 1e400) is the string of the vendor's digits" },
        is_error: { type: 'boolean' },
      },
    },
  },
};

/** The `content` of a problem+json response: the Problem schema that withProblemResponses adds to the components. */
export const PROBLEM_CONTENT = { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } };

/** A documented error answered as application/problem+json (API.md §9); `@ApiResponse({status, schema})` would say application/json. */
export function ApiProblemResponse(status: number, description: string): MethodDecorator & ClassDecorator {
  return ApiResponse({ status, description, content: PROBLEM_CONTENT });
}

/**
 * The conditional requests of a set that answers an ETag (…/policies, …/tool-permissions; if-match.ts). On its GET:
 * If-None-Match, answered 304 (NOT_MODIFIED) when it names the current tag. On its whole-set PUT: If-None-Match, and
 * the 412 (assertPreconditions) with the current ETag, whichever header failed.
 */
export function ApiSetIfNoneMatchOnRead(): MethodDecorator {
  return ApiHeader({
    name: 'If-None-Match',
    required: false,
    description:
      'the ETag of the set as you have it (from GET, or the last PUT; a list of tags, weak ones compared weakly, or *): when it names the current tag, ' +
      '304 Not Modified with no body, so polling reads the set only when it changed',
    schema: { type: 'string' },
  });
}

/** See ApiSetIfNoneMatchOnRead: the If-None-Match of the whole-set PUT and its 412, which carries the current ETag. */
export function ApiSetPreconditions(): MethodDecorator {
  return applyDecorators(
    ApiHeader({
      name: 'If-None-Match',
      required: false,
      description:
        'a list of entity tags (weak ones compared weakly) or *: when it names the set’s current tag, or is * (the set always exists, as {rules: []} or ' +
        '{items: []} when never set), 412 PRECONDITION_FAILED and nothing is written. Evaluated after If-Match; anything else is 400',
      schema: { type: 'string' },
    }),
    ApiResponse({
      status: 412,
      description: `${PRECONDITION_FAILED_TEXT}. Also when If-None-Match named the current tag, or is *`,
      content: PROBLEM_CONTENT,
      headers: { ETag: { description: 'the set’s current tag: read the set again (GET) and send the change against it', schema: { type: 'string' } } },
    }),
  );
}

/**
 * The responses of a route that records tool calls. `forbidden` is its problem+json 403 (api-roles.ts forbiddenText,
 * naming the roles): one 403 documents both bodies, as a second ApiResponse(403) would be merged into this one.
 */
export function ApiToolCallResponses(forbidden: string): MethodDecorator {
  // 403 and 422 are the tool-call body (application/json) when the call reached the ledger, problem+json otherwise.
  const bodyOrProblem = { 'application/json': { schema: TOOL_CALL_BODY_SCHEMA }, ...PROBLEM_CONTENT };
  // A stored call's answer (first or replayed) is the tool-call body; a replay says so in Idempotent-Replayed.
  const replayed = { 'Idempotent-Replayed': IDEMPOTENT_REPLAYED_HEADER };
  return applyDecorators(
    ApiResponse({ status: 200, description: 'succeeded, failed at the vendor, or indeterminate', schema: TOOL_CALL_BODY_SCHEMA, headers: replayed }),
    ApiResponse({ status: 202, description: 'waiting for approval', schema: TOOL_CALL_BODY_SCHEMA, headers: replayed }),
    ApiResponse({
      status: 403,
      description: `blocked (flag, manifest, policy, rejected, expired, or its run ended while it waited for an approval: RUN_NOT_ACTIVE) — tool-call body (application/json); or ${forbidden} — problem+json`,
      content: bodyOrProblem,
      headers: replayed,
    }),
    ApiResponse({
      status: 422,
      description:
        'INVALID_INPUT — tool-call body (application/json), also for a tool of the run whose input has no string `action` (the content lists the actions the run allows); ' +
        'or IDEMPOTENCY_KEY_REUSED — problem+json (also an Idempotency-Key already used in the org for a call of a run the agent key did not start: that call is never replayed to it)',
      content: bodyOrProblem,
      headers: replayed,
    }),
    ApiProblemResponse(
      400,
      'BAD_REQUEST: the body is not a tool_use block as documented (or not JSON), holds a number a double would change (an integer beyond 2^53, ' +
        'more significant digits than a double holds: send it as a string), or the Idempotency-Key header is not 1-255 printable ASCII ' +
        'or is sent more than once; or the tool_use id or Idempotency-Key holds a credential (an access token\'s or key\'s shape: identifiers are ' +
        'stored and shown as sent); nothing recorded',
    ),
    ApiProblemResponse(404, 'RUN_NOT_FOUND (also another org’s run, and, to an agent key, a run another key started)'),
    ApiResponse({
      status: 409,
      description:
        'RUN_NOT_ACTIVE; IDEMPOTENCY_IN_PROGRESS with Retry-After; or CONFLICT: the org’s feature flag or policy kept changing (on another ' +
        'replica) while the call was decided; nothing recorded, send it again',
      content: PROBLEM_CONTENT,
      headers: { 'Retry-After': RETRY_AFTER_HEADER },
    }),
    ApiProblemResponse(
      429,
      'CONCURRENCY_LIMIT (org × vendor) or RATE_LIMITED (per key), with Retry-After. A replay of a succeeded call is never refused for its ' +
        'size, but costs one more request per 64 KiB of its stored result beyond the first (the whole result is decrypted), as debt the ' +
        'key\'s next requests wait for; one sent alone while the key is in debt already is RATE_LIMITED, nothing decrypted',
    ),
    ApiProblemResponse(
      503,
      `${UNAVAILABLE}. Without \`toolCallId\`: nothing was executed, and the vendor was not called. The call may still have been ` +
        'recorded (the database went away as it committed, and its answer was lost): send the same tool_use again later; it then ' +
        'runs, or, if it was recorded, answers 200 failed / EXECUTION_ERROR (not sent, nothing charged), and a new tool_use id is needed ' +
        'to try it again. With `toolCallId` and ' +
        '`outcomeConfirmed: false`: the call was recorded and ran (the detail says whether the vendor was called), but its outcome ' +
        'may not be written yet; the gateway keeps it and retries. Send the same tool_use again (same id or Idempotency-Key) to read ' +
        'it (409 IDEMPOTENCY_IN_PROGRESS until then) — never under a new id',
    ),
  );
}

/** An operation with an `orgId` query filter: an org key naming another org gets 404 (API.md §9). */
const hasOrgIdFilter = (op: OpenApiOperation): boolean =>
  (op.parameters ?? []).some((x) => typeof x === 'object' && x !== null && (x as { in?: unknown }).in === 'query' && (x as { name?: unknown }).name === 'orgId');

/** There is no 405: a known path with a method it does not have is routed nowhere, like an unknown path. */
const NO_SUCH_ROUTE =
  'An unknown path, or a known path with a method it does not support (e.g. DELETE /v1/tools), answers 404 NOT_FOUND ' +
  'with detail "no such route" (problem+json); there is no 405 Method Not Allowed.';

/** What any /v1 route answers 400 before its own checks (the URL guard, AuthGuard, refuseQueryParameters). */
const REQUEST_REFUSALS =
  'On any route: VALIDATION_FAILED for a query parameter the route does not take (named, unless it looks like a secret); ' +
  'BAD_REQUEST for a malformed request: a bad percent-escape, NUL or `#` in the URL, no Host header, or more than one Authorization header';

/**
 * An operation whose body the reader judges (json-body.ts): one documenting a request body, and every DELETE: it takes
 * none, but one sent is read as a POST's is (its size limit, its media type) and refused unless empty.
 */
const readsBody = (op: OpenApiOperation, method: (typeof METHODS)[number]): boolean => op.requestBody !== undefined || method === 'delete';

/** The 413 of a route: the body limit json-body.ts enforces on its path (bodyLimitFor), in bytes and KiB. */
function payloadTooLarge(path: string, method: (typeof METHODS)[number]): string {
  const limit = bodyLimitFor(path);
  const which = limit === TOOL_CALL_BODY_LIMIT ? 'the limit of the tool-call routes' : 'the limit of every route but the tool-call ones';
  return (
    `PAYLOAD_TOO_LARGE: the body is over ${limit / 1024} KiB (${limit} bytes, ${which}${method === 'delete' ? '; a DELETE takes no body, but one sent is read as any other' : ''}). ` +
    'Answered as soon as the Content-Length or the bytes read exceed it: the rest is not read, and the connection is closed'
  );
}

/** What the body reader refuses 400 on a route that reads a body (readsBody), whatever the route's own checks. */
function bodyRefusals(path: string, method: (typeof METHODS)[number]): string {
  const depth = path.endsWith(':batch')
    ? `nested deeper than ${MAX_JSON_DEPTH + 2} levels of arrays and objects (each tool_use as deep as a single call's ${MAX_JSON_DEPTH}, the {"toolUses": […]} envelope adding 2)`
    : `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`;
  const onDelete = method === 'delete' ? '; VALIDATION_FAILED for a body other than {} or null (a DELETE takes no body)' : '';
  return `BAD_REQUEST for a body ${depth}, or that is not valid UTF-8${onDelete}`;
}

/** Every documented route is authenticated; these are the errors any of them can answer (API.md §9). */
const COMMON_ERRORS: [
  status: string,
  description: string | ((path: string, method: (typeof METHODS)[number]) => string),
  when: (path: string, op: OpenApiOperation, method: (typeof METHODS)[number]) => boolean,
][] = [
  ['400', 'VALIDATION_FAILED (or BAD_REQUEST for a body that is not JSON): a query, path or body field is invalid', (path, op) => path.includes('{') || (op.parameters?.length ?? 0) > 0 || op.requestBody !== undefined],
  ['401', 'UNAUTHENTICATED: no valid API key', () => true],
  ['403', 'FORBIDDEN: this key’s role may not call the route', () => true],
  [
    '404',
    'NOT_FOUND: no such resource, or one of another org (indistinguishable); with an `orgId` filter, an org key naming another org. ' +
      'A method this path does not support also answers 404 NOT_FOUND "no such route" (there is no 405)',
    (path, op) => path.includes('{') || hasOrgIdFilter(op),
  ],
  ['408', 'BAD_REQUEST: the request line, headers and body did not all arrive within HTTP_REQUEST_TIMEOUT_MS; the connection is closed', () => true],
  [
    '412',
    'PRECONDITION_FAILED: an If-Match naming an entity tag, or If-None-Match: *, on a write: nothing this route writes has a tag ' +
      '(only the PUTs of …/policies and …/tool-permissions, which document their own 412), so the condition cannot hold; nothing was done',
    (_path, _op, method) => method !== 'get',
  ],
  ['413', payloadTooLarge, (_path, op, method) => readsBody(op, method)],
  ['417', 'BAD_REQUEST: an Expect header other than 100-continue; the connection is closed', () => true],
  ['431', 'PAYLOAD_TOO_LARGE: the request headers are too large', () => true],
  [
    '415',
    (_path, method) =>
      'UNSUPPORTED_MEDIA_TYPE: send the body as application/json, UTF-8, without a Content-Encoding' +
      (method === 'delete' ? ' (a DELETE takes no body: an empty one is not judged, any other must be JSON too)' : ''),
    (_path, op, method) => readsBody(op, method),
  ],
  ['429', 'RATE_LIMITED (per API key), with Retry-After', () => true],
  ['503', UNAVAILABLE, () => true],
  ['500', 'INTERNAL: an unexpected error; nothing about it is in the answer but its correlation id, with which the gateway logged it', () => true],
];

interface OpenApiOperation {
  parameters?: unknown[];
  requestBody?: unknown;
  responses?: Record<string, { description?: string; content?: unknown; headers?: Record<string, unknown> }>;
}

const METHODS = ['get', 'put', 'post', 'patch', 'delete'] as const;

/**
 * Adds to every operation the problem+json errors it can answer but does not
 * document itself (a route's own description of a status wins), and the
 * Problem schema they refer to; says in the description that a wrong method is
 * a 404 "no such route", not a 405. Every answer documents X-Correlation-Id,
 * every 429 and 503 Retry-After; every /v1 operation takes it as an optional
 * request header. Body schemas, DTO and inline, are closed (closeBodyDtoSchemas); every 401 documents WWW-Authenticate.
 */
export function withProblemResponses(doc: OpenAPIObject): OpenAPIObject {
  doc.info = { ...doc.info, description: doc.info.description ? `${doc.info.description} ${NO_SUCH_ROUTE}` : NO_SUCH_ROUTE };
  closeBodyDtoSchemas(doc);
  doc.components = { ...doc.components, schemas: { ...doc.components?.schemas, Problem: PROBLEM_SCHEMA } };
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) {
      const op = item[method] as OpenApiOperation | undefined;
      if (!op) continue;
      const responses = (op.responses ??= {});
      for (const [status, description, applies] of COMMON_ERRORS) {
        if (responses[status] === undefined && applies(path, op, method)) {
          const text = typeof description === 'string' ? description : description(path, method);
          responses[status] = { description: text, content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } };
        }
      }
      // The refusals of a malformed request, before any route's own checks: on every /v1 operation's 400.
      if (path.startsWith('/v1/')) {
        const own = responses['400'];
        const refusals = readsBody(op, method) ? `${bodyRefusals(path, method)}. ${REQUEST_REFUSALS}` : REQUEST_REFUSALS;
        responses['400'] = own
          ? { ...own, description: `${own.description ?? ''}. ${refusals}` }
          : { description: refusals, content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } };
      }
      // After the common errors: an optional header must not make an operation look like it takes parameters (400).
      // The middleware reads it on every route; /v1 is what the document describes (health and metrics are not in it).
      if (path.startsWith('/v1/') && !op.parameters?.some((x) => isHeaderParameter(x, 'x-correlation-id'))) {
        op.parameters = [...(op.parameters ?? []), CORRELATION_ID_PARAMETER];
      }
      for (const [status, res] of Object.entries(responses)) {
        const retry = status === '429' || status === '503' ? { 'Retry-After': RETRY_AFTER_HEADER } : {};
        const challenge = status === '401' ? { 'WWW-Authenticate': WWW_AUTHENTICATE_HEADER } : {};
        res.headers = { 'X-Correlation-Id': CORRELATION_ID_HEADER, ...retry, ...challenge, ...res.headers };
      }
    }
  }
  return doc;
}

const isHeaderParameter = (x: unknown, name: string): boolean =>
  typeof x === 'object' && x !== null && (x as { in?: unknown }).in === 'header' && String((x as { name?: unknown }).name).toLowerCase() === name;

/** A request body as the document holds it (inline schemas are plain objects). */
interface RequestBody {
  content?: Record<string, { schema?: { $ref?: string; type?: unknown; properties?: unknown; additionalProperties?: unknown } }>;
}

const COMPONENT_REF = /"\$ref":"#\/components\/schemas\/([^"]+)"/g;

/**
 * Says `additionalProperties: false` on every component schema a request body reaches, nested ones included
 * (PutToolPermissionsDto's items): those are class-validator DTOs, and the global ValidationPipe
 * (forbidNonWhitelisted) answers 400 VALIDATION_FAILED to a field they do not declare. Query DTOs are inlined as
 * parameters, never reached from a body. A schema that states additionalProperties itself keeps it.
 * An inline body schema (@ApiBody({schema}): …/policies, …/credentials, the tool-call routes) is closed at its top
 * level too: every route refuses a body field it does not take (PoliciesService.replace: a GET answer's `version` sent
 * back is 400), whatever validates it; what it nests is closed, or left open, by the schema that states it.
 */
function closeBodyDtoSchemas(doc: OpenAPIObject): void {
  const schemas = (doc.components?.schemas ?? {}) as Record<string, { additionalProperties?: unknown }>;
  const refsIn = (x: unknown): string[] => [...JSON.stringify(x ?? null).matchAll(COMPONENT_REF)].map((m) => m[1]);
  const bodies = Object.values(doc.paths).flatMap((item) => METHODS.map((m) => (item[m] as { requestBody?: RequestBody } | undefined)?.requestBody));
  for (const media of bodies.flatMap((body) => Object.values(body?.content ?? {}))) {
    const schema = media.schema;
    if (schema && schema.$ref === undefined && (schema.type === 'object' || schema.properties !== undefined)) schema.additionalProperties ??= false;
  }
  const pending = bodies.flatMap(refsIn);
  const seen = new Set<string>();
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    const schema = schemas[name];
    if (seen.has(name) || !schema) continue;
    seen.add(name);
    schema.additionalProperties ??= false;
    pending.push(...refsIn(schema));
  }
}
