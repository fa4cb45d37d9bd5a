import { Body, Controller, Headers, HttpCode, Param, Post, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiHeader, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { rememberBatchAnswers } from '../../logging/answered-call.js';
import { CurrentPrincipal, KeyCheckedInWrite, RateCost, Roles } from '../../auth/auth.decorators.js';
import type { Principal } from '../../auth/principal.js';
import { ApiRoles, PLATFORM_KEY_BELONGS_TO_NO_ORG } from '../../common/http/api-roles.js';
import { ApiProblemResponse, PROBLEM_SCHEMA, TOOL_CALL_BODY_SCHEMA } from '../../common/http/openapi.js';
import { TOOL_USE_SCHEMA } from '../tool-use.schema.js';
import { batchRateCost, MAX_BATCH_SIZE } from './batch-request.js';
import { ToolCallBatchService, type BatchResponse } from './tool-call-batch.service.js';

const BATCH_BODY_SCHEMA = {
  type: 'object',
  required: ['toolUses'],
  additionalProperties: false,
  properties: {
    toolUses: {
      type: 'array',
      minItems: 1,
      maxItems: MAX_BATCH_SIZE,
      items: {
        ...TOOL_USE_SCHEMA,
        description:
          'a tool_use block, as for POST /v1/runs/{runId}/tool-calls; ids unique within the batch. An item that is not one ' +
          'does not fail the batch: its entry in `results` is a 400 BAD_REQUEST problem',
      },
    },
  },
};

const BATCH_RESULTS_SCHEMA = {
  type: 'object',
  required: ['results'],
  properties: {
    results: {
      type: 'array',
      description: 'one entry per tool_use, in the order given: the tool-call body, or problem+json (with its status) for an item that has no ledger row',
      items: { oneOf: [TOOL_CALL_BODY_SCHEMA, PROBLEM_SCHEMA] },
    },
  },
};

@ApiTags('tool-calls')
@ApiBearerAuth()
@Controller('v1')
export class ToolCallBatchController {
  constructor(private readonly batch: ToolCallBatchService) {}

  // The colon is escaped: unescaped, path-to-regexp would read ":batch" as a parameter.
  @Post('runs/:runId/tool-calls\\:batch')
  @KeyCheckedInWrite()
  @RateCost(batchRateCost)
  @Roles('agent', 'admin')
  @HttpCode(200)
  @ApiRoles(['agent', 'admin'], {
    note:
      'Keys of the run’s org (another org’s run → 404 RUN_NOT_FOUND); an agent key only in a run it started (another agent key’s run → 404 ' +
      'RUN_NOT_FOUND for the whole batch, nothing recorded), an admin key in any run of its org; a platform key (orgId null) has no org: 403 FORBIDDEN.',
    forbiddenAlso: PLATFORM_KEY_BELONGS_TO_NO_ORG,
    summary: 'Several tool_use blocks of one model turn',
    description:
      `Up to ${MAX_BATCH_SIZE} tool_uses, each through the full pipeline as if posted alone (own ledger row, idempotency key = run id + tool_use id). ` +
      'Consecutive read-only actions run concurrently (at most 8 at once); a write, an unknown or an invalid call runs alone, in order. ' +
      'One failing item never stops the others (only a write that has not run holds the writes after it, below). A batch-wide budget (BATCH_BUDGET_BYTES, default 200 KB) over every toolResult.content ' +
      'truncates the largest results first; a truncated one says so and stays whole at GET /v1/tool-calls/{id}/result. ' +
      'Re-posting the same batch replays every item. Re-posted while an item is still executing (the first post still runs), ' +
      'that item and every item after it that has not run yet answer 409 IDEMPOTENCY_IN_PROGRESS (nothing after it starts: writes stay ' +
      'one at a time, in order; only a read run concurrently with it, in its group of consecutive reads, may still start, which changes nothing); ' +
      'items after it that already ran are replayed. A write waiting for approval has not run either: ' +
      'the writes after it answer 409 IDEMPOTENCY_IN_PROGRESS (not started, nothing recorded; reads still run) until it has been decided ' +
      'and has run: re-post the batch then. Nor has a write refused before it had an outcome, for a reason a re-post may overcome ' +
      '(429 CONCURRENCY_LIMIT or RATE_LIMITED, 503 DATABASE_UNAVAILABLE, 409 CONFLICT, 500): the writes after it answer the same 409 ' +
      '(its detail names that item; nothing recorded, nothing sent; reads still run) until a re-post has run it, before them. ' +
      'A write refused 422 IDEMPOTENCY_KEY_REUSED (its tool_use id re-sent with another input) never runs, but the call first sent ' +
      'under that id may not have run yet: while it waits for approval or is still to run or running, the writes after it answer ' +
      'the same 409 (its detail names that item) until that call has run. ' +
      'A write refused for good (blocked, failed INVALID_INPUT, 409 RUN_NOT_ACTIVE, 422 IDEMPOTENCY_KEY_REUSED once the call under its ' +
      'id has settled) or with a recorded ' +
      'outcome (succeeded, failed at the vendor, indeterminate) holds nothing: a re-post replays or refuses it, never runs it, so no ' +
      'later write can overtake it; the writes after it run. When the gateway starts stopping (SIGTERM) during a ' +
      'batch, the items it has not started answer 503 GATEWAY_STOPPING (with Retry-After): send the batch again. ' +
      'A batch spends one of the key’s rate-limit tokens (RATE_LIMIT_RPS) per tool_use it holds; one larger than the burst (twice ' +
      'RATE_LIMIT_RPS) passes a full bucket and leaves the key owing the rest, which its next requests wait for. Without enough, the ' +
      'whole batch answers 429 RATE_LIMITED with a Retry-After long enough for all of it, nothing recorded.',
  })
  @ApiHeader({ name: 'Idempotency-Key', required: false, description: 'not supported on batches (400): each item is keyed by its tool_use id' })
  @ApiBody({ description: `{toolUses: [tool_use, ...]}: 1 to ${MAX_BATCH_SIZE} tool_use blocks with unique ids (400 VALIDATION_FAILED otherwise)`, schema: BATCH_BODY_SCHEMA })
  @ApiResponse({ status: 200, description: 'every item answered, in the order given, whatever each outcome', schema: BATCH_RESULTS_SCHEMA })
  @ApiProblemResponse(
    400,
    `VALIDATION_FAILED: not {toolUses: [...]} (not an object, an unknown field, toolUses not an array), 0 or more than ${MAX_BATCH_SIZE} items, ` +
      'or duplicate tool_use ids. BAD_REQUEST: an Idempotency-Key header (each item is keyed by its tool_use id), or a body that is not JSON. ' +
      'Nothing recorded',
  )
  @ApiProblemResponse(
    401,
    'UNAUTHENTICATED: no valid API key; also a key revoked (on another replica) before any item ran or was replayed — one 401 for the batch, ' +
      'nothing recorded. A key revoked while the batch runs answers the items after that 401 per item (those before it stand)',
  )
  @ApiProblemResponse(404, 'RUN_NOT_FOUND (also another org’s run)')
  @ApiProblemResponse(429, 'RATE_LIMITED: the key has fewer rate-limit tokens than the batch has tool_uses (Retry-After says when it will). Nothing recorded')
  @ApiProblemResponse(409, 'RUN_NOT_ACTIVE: the run was completed or cancelled and no item is a call it made before (those are replayed, the others answer RUN_NOT_ACTIVE per item)')
  async submit(
    @CurrentPrincipal() p: Principal,
    @Param('runId') runId: string,
    @Body() body: unknown,
    @Headers('idempotency-key') idem: string | undefined,
    @Req() req: Request & { correlationId?: string },
    @Res({ passthrough: true }) res: Response,
  ): Promise<BatchResponse> {
    const answer = await this.batch.submit(p, runId, body, idem, req.correlationId ?? 'unknown');
    // The batch's line names each item's call and the items refused before anything was recorded (nothing else does).
    rememberBatchAnswers(res, answer.results as Record<string, unknown>[]);
    return answer;
  }
}
