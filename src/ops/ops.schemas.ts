/**
 * OpenAPI schemas of the ops read side (API.md §6) and of approvals (§5), field by field from the code that builds
 * each answer: approvalView (approvals/approval.view.ts), ReconcileService.reconcile, toToolCallView
 * (tool-calls/tool-call.view.ts), loadToolCallStory (tool-call-story.ts), ledgerEventView (ledger-events.sql.ts),
 * verifyOrgChain (ledger/ledger-verifier.service.ts) and UsageService.byTool.
 * test/foundation/openapi-response-schemas.spec.ts validates live answers against them.
 */
import type { SchemaObject } from '@nestjs/swagger';
import { TOOL_CALL_STATUSES } from '../tool-calls/tool-call-status.js';
import { POLICY_DECISIONS, RISK_LEVELS } from '../policy/policy.types.js';

const uuid = { type: 'string', format: 'uuid' } as const;
const nullableUuid = { type: 'string', format: 'uuid', nullable: true } as const;
const dateTime = { type: 'string', format: 'date-time' } as const;
const nullableDateTime = { type: 'string', format: 'date-time', nullable: true } as const;
const sha256Hex = { type: 'string', pattern: '^[0-9a-f]{64}$' } as const;

/** A ToolCall as ops see it: toToolCallView (API.md §6). Also each line of the NDJSON export. */
export const TOOL_CALL_VIEW_SCHEMA = {
  type: 'object',
  required: [
    'id', 'orgId', 'runId', 'specialistId', 'toolName', 'action', 'status', 'errorCode', 'errorText', 'correlationId', 'idempotencyKey',
    'actionDigest', 'inputRedacted', 'outputRedacted', 'riskLevel', 'policyDecisionId', 'retryCount', 'durationMs', 'costCents',
    'createdAt', 'startedAt', 'finishedAt', 'note',
  ],
  properties: {
    id: uuid,
    orgId: uuid,
    runId: uuid,
    specialistId: { type: 'string' },
    toolName: { type: 'string', example: 'order_lookup' },
    action: { type: 'string', example: 'lookup' },
    status: { type: 'string', enum: [...TOOL_CALL_STATUSES] },
    errorCode: { type: 'string', nullable: true, example: 'VENDOR_TIMEOUT' },
    errorText: { type: 'string', nullable: true },
    correlationId: { type: 'string', description: 'the X-Correlation-Id of the request that recorded the call' },
    idempotencyKey: { type: 'string', description: 'the Idempotency-Key the client sent, or the tool_use id for the default key (scoped to the run)' },
    actionDigest: { ...sha256Hex, description: 'HMAC-SHA256 hex, under the org\'s digest key, of the canonical action (tool, action, params); plain SHA-256 for calls recorded before digests were keyed' },
    inputRedacted: { type: 'object', additionalProperties: true, description: 'the params (input without `action`), redacted' },
    outputRedacted: {
      description:
        'the vendor result, redacted: any JSON value, null when there is none. When its JSON is over 64 KiB as PostgreSQL stores it (jsonb adds a blank after each , and : and writes every ' +
        'digit of a number) the ledger keeps {truncated: true, bytes: <its size in UTF-8 bytes as JSON text>, preview: <its first 16 KiB at most, as text>} instead; ' +
        'only this ledger copy is cut: the agent got the whole result (and reads it from GET /v1/tool-calls/{id}/result ' +
        'until RESULT_TTL_SECONDS)',
    },
    riskLevel: { type: 'string', nullable: true, enum: [...RISK_LEVELS, null], description: 'the policy decision’s risk, else the catalog’s; null for a call to no catalog action' },
    policyDecisionId: { ...nullableUuid, description: 'null when no policy decision was recorded for the call' },
    retryCount: { type: 'integer', minimum: 0 },
    durationMs: { type: 'integer', nullable: true, description: 'time spent executing; null when the call did not run (yet)' },
    costCents: { type: 'integer' },
    createdAt: dateTime,
    startedAt: { ...nullableDateTime, description: 'null until execution started' },
    finishedAt: { ...nullableDateTime, description: 'null until the call settled' },
    note: { type: 'string', nullable: true, description: "the operator's note of an ops reconcile (POST /v1/tool-calls/{id}/reconcile): why the call was settled so; null for every other call" },
  },
};

/** GET /v1/tool-calls: ToolCallsQueryService.list. */
export const TOOL_CALL_PAGE_SCHEMA = {
  type: 'object',
  required: ['items', 'nextCursor'],
  properties: {
    items: { type: 'array', items: TOOL_CALL_VIEW_SCHEMA, description: 'newest first' },
    nextCursor: {
      type: 'string',
      nullable: true,
      description:
        'null on the last page; pass it as `cursor`, with the same filters, for the next one. A page ends before `limit` ' +
        'items, with a cursor, once its rows hold 16 MiB of redacted input and output',
    },
  },
};

/** The actor of a ledger event: the API key that acted (ledger/ledger-event.entity.ts EventActor); null for the system. */
const EVENT_ACTOR_SCHEMA = {
  type: 'object',
  nullable: true,
  description:
    'the key that caused the event (API.md §9): for a tool call, the key that posted it, on its requested, started, retried and ' +
    'outcome events alike; the deciding key on an approval event; null for what the gateway does itself (starting an approved ' +
    'call and recording its outcome, the orphan sweep)',
  required: ['keyId', 'role'],
  properties: {
    keyId: nullableUuid,
    role: { type: 'string', nullable: true, example: 'agent' },
    correlationId: {
      type: 'string',
      example: 'req-7f3a',
      description:
        "on an event a key's request caused other than the tool call's own post (a flag, policy, permission, key, credentials or org change, a run created " +
        "or ended, an approval decision, a reconcile): that request's X-Correlation-Id as echoed, to find its log line; absent otherwise (the call's own " +
        'events: its correlationId is on the call)',
    },
  },
};

/** An event of a call's story: loadToolCallStory. */
const TOOL_CALL_EVENT_SCHEMA = {
  type: 'object',
  required: ['id', 'type', 'actor', 'metadata', 'createdAt', 'chainSeq', 'hash'],
  properties: {
    id: uuid,
    type: { type: 'string', example: 'tool_call.requested' },
    actor: EVENT_ACTOR_SCHEMA,
    metadata: { type: 'object', additionalProperties: true, description: 'facts of the event, per type; {nestedTooDeep: true, maxDepth: 64} for one written around the gateway nested deeper than 64 levels (verify reports it)' },
    createdAt: dateTime,
    chainSeq: { type: 'integer', nullable: true, description: 'null until the sealer has chained it (a fraction of a second)' },
    hash: { ...sha256Hex, nullable: true, description: 'null until sealed' },
  },
};

const POLICY_DECISION_SCHEMA = {
  type: 'object',
  nullable: true,
  description: 'the decision the call row points at (else the call’s latest); null when none was recorded',
  required: ['id', 'decision', 'riskLevel', 'ruleId', 'reason', 'actionDigest', 'createdAt'],
  properties: {
    id: uuid,
    decision: { type: 'string', enum: [...POLICY_DECISIONS] },
    riskLevel: { type: 'string', enum: [...RISK_LEVELS] },
    ruleId: { type: 'string', nullable: true, description: 'null when no rule matched and the risk default applied' },
    reason: { type: 'string' },
    actionDigest: sha256Hex,
    createdAt: dateTime,
  },
};

/**
 * An approval as approvalView (approvals/approval.view.ts) answers it (API.md §5): GET /v1/approvals (each item),
 * GET /v1/approvals/{id} and POST /v1/approvals/{id}/decision.
 */
export const APPROVAL_SCHEMA = {
  type: 'object',
  required: [
    'id', 'orgId', 'toolCallId', 'runId', 'kind', 'status', 'toolName', 'action', 'inputRedacted', 'inputShownExactly', 'riskLevel', 'reason', 'actionDigest',
    'createdAt', 'expiresAt', 'decidedBy', 'decidedAt', 'decisionReason', 'toolCallStatus', 'toolCallErrorCode',
    'inputWarnings', 'requestedBy', 'specialistId', 'ruleId', 'decidedRole',
  ],
  properties: {
    id: uuid,
    orgId: uuid,
    toolCallId: uuid,
    runId: uuid,
    kind: { type: 'string', enum: ['expert', 'client'], description: 'expert: decided by expert or admin keys; client: by any agent key of the run’s org (or an admin key)' },
    status: { type: 'string', enum: ['pending', 'approved', 'rejected', 'expired'], description: 'a pending approval past expiresAt reads expired' },
    toolName: { type: 'string' },
    action: { type: 'string' },
    inputRedacted: { type: 'object', additionalProperties: true, description: 'the params of the action awaiting approval, redacted' },
    inputShownExactly: {
      type: 'boolean',
      nullable: true,
      description:
        'true: inputRedacted is exactly the input that runs. false: redaction hid, cut or replaced part of it (a secret-looking ' +
        'value, a card-shaped number, text or arrays past the size bounds, NUL or an unpaired surrogate shown as U+FFFD), so ' +
        'two different actions may look alike here; the "[REDACTED]" and "[Truncated]" markers cannot tell, as the caller may ' +
        'have written them. null: not recorded (an approval made before this field existed)',
    },
    inputWarnings: {
      type: 'array',
      maxItems: 20,
      items: { type: 'string' },
      description:
        'where inputRedacted may be drawn otherwise than it runs, by path: invisible or direction-changing characters (Unicode format ' +
        'characters: "\\u202E00.009" draws as 900.00), Latin letters mixed with Cyrillic or Greek ones in one word, two members of one ' +
        'object drawn alike. Empty: none found. An expert should look closer at, or reject, an approval with any',
    },
    requestedBy: { ...nullableUuid, description: 'the agent key that posted the call' },
    specialistId: { type: 'string', nullable: true, description: 'the specialist of the run the call is in' },
    ruleId: { type: 'string', nullable: true, description: 'the policy rule that asked for the approval; null: the default for the catalog risk level' },
    riskLevel: { type: 'string', enum: [...RISK_LEVELS] },
    reason: { type: 'string', description: 'why it needs approval (the policy’s reason)' },
    actionDigest: { ...sha256Hex, description: 'send it back with the decision: it proves what exactly is being approved' },
    createdAt: dateTime,
    expiresAt: dateTime,
    decidedBy: { ...nullableUuid, description: 'the key that decided; null while pending and when it expired' },
    decidedRole: {
      type: 'string',
      nullable: true,
      enum: ['expert', 'admin', 'agent', null],
      description: 'the role of the key that decided: expert or admin; agent for a client approval, or when the run was ended by its agent (not an expert’s rejection). Null while pending and when it expired',
    },
    decidedAt: nullableDateTime,
    decisionReason: {
      type: 'string',
      nullable: true,
      description: 'the reason given with the decision (free text, as given), or the reason the run was ended with when its end rejected the approval; null when none was given and when it expired',
    },
    toolCallStatus: {
      type: 'string',
      nullable: true,
      enum: [...TOOL_CALL_STATUSES, null],
      description:
        'the state of the call the approval is for, now: an approval stays `approved` though the call it let through may then be blocked ' +
        '(tool calling turned off, a policy that blocks it now, the run ended), fail at the vendor, or succeed',
    },
    toolCallErrorCode: { type: 'string', nullable: true, description: 'the call’s error code (e.g. FEATURE_DISABLED, POLICY_BLOCKED, RUN_NOT_ACTIVE, VENDOR_ERROR); null while it has none' },
  },
};

/** GET /v1/approvals: ApprovalsService.list. */
export const APPROVAL_PAGE_SCHEMA = {
  type: 'object',
  required: ['items', 'nextCursor'],
  properties: {
    items: { type: 'array', items: APPROVAL_SCHEMA, description: 'newest first' },
    nextCursor: { type: 'string', nullable: true, description: 'null on the last page; pass it as `cursor`, with the same filters, for the next one' },
  },
};

/** The approval of a call's story (loadToolCallStory: an overdue one settled first, shown as of the read). */
const STORY_APPROVAL_SCHEMA = {
  ...APPROVAL_SCHEMA,
  nullable: true,
  description: 'the call’s approval request; one past its expiresAt is settled first and shown expired (with the call blocked APPROVAL_EXPIRED), as on GET /v1/approvals/{id}; null when it needed none',
  properties: {
    ...APPROVAL_SCHEMA.properties,
    status: { type: 'string', enum: ['pending', 'approved', 'rejected', 'expired'] },
  },
};

/** POST /v1/tool-calls/{id}/reconcile: ReconcileService.reconcile (API.md §6). */
export const RECONCILE_SCHEMA = {
  type: 'object',
  required: ['id', 'status', 'note'],
  properties: {
    id: { ...uuid, description: 'the tool call' },
    status: { type: 'string', enum: ['succeeded', 'failed'], description: 'the status the call now has' },
    note: { type: 'string', description: 'what ops found at the vendor, as given' },
  },
};

/** GET /v1/tool-calls/{id}: the ToolCall plus its whole story (ToolCallsQueryService.get). */
export const TOOL_CALL_DETAIL_SCHEMA = {
  type: 'object',
  required: [...TOOL_CALL_VIEW_SCHEMA.required, 'events', 'policyDecision', 'approval'],
  properties: {
    ...TOOL_CALL_VIEW_SCHEMA.properties,
    events: { type: 'array', items: TOOL_CALL_EVENT_SCHEMA, description: 'the call’s ledger events, in append order' },
    policyDecision: POLICY_DECISION_SCHEMA,
    approval: STORY_APPROVAL_SCHEMA,
  },
};

/** GET /v1/ledger/events: LedgerQueryService.events (ledgerEventView). */
export const LEDGER_EVENT_PAGE_SCHEMA = {
  type: 'object',
  required: ['items', 'nextCursor'],
  properties: {
    items: {
      type: 'array',
      description: 'newest first',
      items: {
        type: 'object',
        required: ['id', 'orgId', 'type', 'runId', 'toolCallId', 'actor', 'metadata', 'createdAt', 'createdAtExact', 'chainSeq', 'prevHash', 'hash'],
        properties: {
          id: uuid,
          orgId: { ...uuid, description: 'the nil UUID for platform-level events' },
          type: { type: 'string', example: 'tool_call.requested' },
          runId: nullableUuid,
          toolCallId: nullableUuid,
          actor: EVENT_ACTOR_SCHEMA,
          metadata: { type: 'object', additionalProperties: true, description: 'facts of the event, per type; {nestedTooDeep: true, maxDepth: 64} for one written around the gateway nested deeper than 64 levels (verify reports it)' },
          createdAt: {
            ...dateTime,
            description:
              'UTC, milliseconds. An event written around the gateway before migration 1765200000000 may hold PostgreSQL’s `infinity` or ' +
              '`-infinity` (the gateway never writes one; the ledger keeps it, as it keeps every event, and verify reports it): both fields then say so',
          },
          createdAtExact: {
            type: 'string',
            example: '2026-12-05T14:13:41.963123Z',
            description:
              'createdAt as the event’s hash covers it: UTC with microseconds (createdAt is cut to milliseconds), so the chain can be recomputed ' +
              'outside the gateway (README "Verifying the chain"); `infinity` / `-infinity` as createdAt says',
          },
          chainSeq: { type: 'integer', nullable: true, description: 'position in the org’s hash chain; null until sealed' },
          prevHash: { ...sha256Hex, nullable: true, description: 'null until sealed' },
          hash: { ...sha256Hex, nullable: true, description: 'null until sealed' },
        },
      },
    },
    nextCursor: { type: 'string', nullable: true, description: 'null on the last page; pass it as `cursor`, with the same filters, for the next one' },
  },
};

/** GET /v1/ledger/verify: VerifyResult (verifyOrgChain). */
export const LEDGER_VERIFY_SCHEMA: SchemaObject = {
  oneOf: [
    {
      type: 'object',
      title: 'intact',
      required: ['ok', 'checked', 'headHash'],
      properties: {
        ok: { type: 'boolean', enum: [true] },
        checked: { type: 'integer', minimum: 0, description: 'sealed events checked' },
        headHash: { ...sha256Hex, nullable: true, description: 'hash of the last chained event; null when the chain is empty' },
      },
    },
    {
      type: 'object',
      title: 'broken',
      required: ['ok', 'checked', 'brokenAt'],
      properties: {
        ok: { type: 'boolean', enum: [false] },
        checked: { type: 'integer', minimum: 0, description: 'events found intact before the break' },
        brokenAt: {
          type: 'object',
          required: ['chainSeq', 'eventId', 'reason'],
          properties: {
            chainSeq: { type: 'integer', minimum: 0, description: 'the position that breaks; 0 for an event outside the chain' },
            eventId: { ...nullableUuid, description: 'null when the event at chainSeq is missing' },
            reason: { type: 'string', example: 'event content does not match its hash' },
          },
        },
      },
    },
  ],
};

/** GET /v1/orgs/{orgId}/usage: UsageService.byTool. */
export const USAGE_SCHEMA = {
  type: 'object',
  required: ['byTool'],
  properties: {
    byTool: {
      type: 'array',
      description: 'one entry per tool and action called in the window, ordered by toolName then action',
      items: {
        type: 'object',
        required: ['toolName', 'action', 'calls', 'succeeded', 'failed', 'blocked', 'costCents'],
        properties: {
          toolName: { type: 'string' },
          action: { type: 'string' },
          calls: { type: 'integer', minimum: 0, description: 'every call, whatever its status' },
          succeeded: { type: 'integer', minimum: 0 },
          failed: { type: 'integer', minimum: 0 },
          blocked: { type: 'integer', minimum: 0 },
          costCents: {
            type: 'integer',
            minimum: 0,
            description:
              'the catalog cost of every call whose request reached, or may have reached, the vendor: succeeded, failed at the vendor ' +
              '(a 404, 429 or 5xx answer included) and indeterminate calls; never a blocked call, INVALID_INPUT, CREDENTIALS_NOT_FOUND or ' +
              'CIRCUIT_OPEN. Counted in the window of the call’s creation (createdAt), so a window already past can still grow when a ' +
              'call waiting for approval in it runs later',
          },
        },
      },
    },
  },
};

/** GET /v1/tool-calls/export: the streamed file, one media type per `format`. */
export const EXPORT_CONTENT = {
  'application/x-ndjson': { schema: { type: 'string', description: 'one ToolCall (as GET /v1/tool-calls lists them) per line, as JSON' } },
  'text/csv': { schema: { type: 'string', description: 'a header row of the ToolCall field names, then one row per call' } },
};
