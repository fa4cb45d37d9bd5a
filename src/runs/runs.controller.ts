import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiResponse, ApiTags, type SchemaObject } from '@nestjs/swagger';
import { ApiRoles, PLATFORM_KEY_BELONGS_TO_NO_ORG } from '../common/http/api-roles.js';
import { ApiProblemResponse } from '../common/http/openapi.js';
import { CurrentPrincipal, OrgKeyOnly, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { CreateRunDto, EndRunDto, ToolsQuery } from './runs.dto.js';
import { RUNS_NEED_ORG_KEY, RunsService } from './runs.service.js';

/** A run, as POST /v1/runs and GET /v1/runs/{runId} answer it (API.md §3). */
const RUN_SCHEMA = {
  type: 'object',
  required: ['id', 'orgId', 'specialistId', 'conversationId', 'status', 'pendingApprovalCount', 'totalCostCents', 'manifest', 'metadata', 'createdAt', 'ended'],
  properties: {
    id: { type: 'string', format: 'uuid' },
    orgId: { type: 'string', format: 'uuid' },
    specialistId: { type: 'string' },
    conversationId: { type: 'string', nullable: true },
    status: { type: 'string', enum: ['running', 'waiting_approval', 'completed', 'cancelled'] },
    pendingApprovalCount: { type: 'integer' },
    totalCostCents: { type: 'integer' },
    manifest: {
      type: 'object',
      description: 'a snapshot, taken when the run was created, of the org’s enabled permissions for the specialist',
      required: ['allowedTools'],
      properties: { allowedTools: { type: 'array', items: { type: 'string', example: 'order_lookup.lookup' } } },
    },
    metadata: { type: 'object', additionalProperties: true, description: 'as given at creation ({} when none)' },
    createdAt: { type: 'string', format: 'date-time' },
    ended: {
      type: 'object',
      nullable: true,
      description: 'null while the run is active; once completed or cancelled: when, and the reason given to the end (null when none)',
      required: ['at', 'reason'],
      properties: { at: { type: 'string', format: 'date-time' }, reason: { type: 'string', nullable: true } },
    },
  },
};

/** buildModelTools: one tool per toolName, `action` an enum of the permitted actions plus the union of their params. */
const MODEL_TOOL_INPUT_SCHEMA = {
  type: 'object',
  required: ['type', 'properties', 'required'],
  description: 'JSON Schema: {type: "object", properties: {action: {type: "string", enum: [...]}, ...the actions’ params}, required: ["action"]}',
  properties: {
    type: { type: 'string', enum: ['object'] },
    properties: { type: 'object', additionalProperties: true },
    required: { type: 'array', items: { type: 'string', enum: ['action'] } },
  },
};

/** GET /v1/runs/{runId}/tools: formatTools, in the shape of the `format` asked for. */
const RUN_TOOLS_SCHEMA: SchemaObject = {
  type: 'object',
  required: ['tools'],
  properties: {
    tools: {
      type: 'array',
      description: 'by tool name; empty when the manifest permits nothing',
      items: {
        oneOf: [
          {
            type: 'object',
            title: 'anthropic',
            required: ['name', 'description', 'input_schema'],
            properties: { name: { type: 'string', example: 'order_lookup' }, description: { type: 'string' }, input_schema: MODEL_TOOL_INPUT_SCHEMA },
          },
          {
            type: 'object',
            title: 'openai',
            required: ['type', 'function'],
            properties: {
              type: { type: 'string', enum: ['function'] },
              function: {
                type: 'object',
                required: ['name', 'description', 'parameters', 'strict'],
                properties: {
                  name: { type: 'string', example: 'order_lookup' },
                  description: { type: 'string' },
                  parameters: MODEL_TOOL_INPUT_SCHEMA,
                  strict: { type: 'boolean', enum: [false] },
                },
              },
            },
          },
          {
            type: 'object',
            title: 'openai-responses',
            required: ['type', 'name', 'description', 'parameters', 'strict'],
            properties: {
              type: { type: 'string', enum: ['function'] },
              name: { type: 'string', example: 'order_lookup' },
              description: { type: 'string' },
              parameters: MODEL_TOOL_INPUT_SCHEMA,
              strict: { type: 'boolean', enum: [false] },
            },
          },
        ],
      },
    },
  },
};

const END_DESCRIPTION =
  'For agent keys and admin keys of the run’s org (API.md leaves ending a run open; this is the gateway’s answer). ' +
  'From then on nothing new executes in the run, on any replica: new tool calls get 409 RUN_NOT_ACTIVE (a call the run made ' +
  'before is still replayed); its pending approvals are rejected (decidedBy the key that ended it, decisionReason its reason) and the calls waiting for them, or ' +
  'approved but not yet started, are blocked with RUN_NOT_ACTIVE; calls already at the vendor finish and record their outcome; a refund ' +
  'still waiting for its order (another refund of it at Shopify), or a retry waiting out a vendor\'s Retry-After, is not sent: failed ' +
  'EXECUTION_ERROR (the retry: the answer it had). ' +
  'A ledger event run.completed / run.cancelled records who ended it and whether a reason was given; the free-text reason stays off ' +
  'the append-only ledger: it is on the run (`ended.reason`) and on the approvals the end rejected (`decisionReason`).';

/** RunsService.get (reachesRun): org keys reach their own org's runs only, agent keys the ones they started, platform keys any org's. */
const RUN_SCOPE =
  'An org key reaches its own org’s runs (another org’s → 404); a platform key (orgId null) any org’s. ' +
  'An agent key reaches only the runs it started: another agent key’s run of the org is 404 like a missing one (a replaced key does not ' +
  'inherit its predecessor’s runs); the org’s admin keys reach every run of the org.';

@ApiTags('runs')
@ApiBearerAuth()
@Controller('v1/runs')
export class RunsController {
  constructor(private readonly runs: RunsService) {}

  @Post()
  @Roles('agent', 'admin')
  @OrgKeyOnly(RUNS_NEED_ORG_KEY)
  @ApiRoles(['agent', 'admin'], {
    note:
      'Keys of an org: the run belongs to the key’s org, and to the key that started it: only that key, or an admin key of the org, ' +
      'reads it, ends it and posts its tool calls (another agent key of the org gets 404). ' +
      'A platform key (orgId null) belongs to no org and cannot create runs: 403 FORBIDDEN (use an admin key of the org).',
    summary: 'Start a run',
    forbiddenAlso: PLATFORM_KEY_BELONGS_TO_NO_ORG,
  })
  @ApiResponse({ status: 201, description: 'the run, status running', schema: RUN_SCHEMA })
  create(@CurrentPrincipal() p: Principal, @Body() dto: CreateRunDto) {
    return this.runs.create(p, dto);
  }

  @Get(':runId')
  @Roles('agent', 'ops', 'admin')
  @ApiRoles(['agent', 'ops', 'admin'], RUN_SCOPE)
  @ApiResponse({ status: 200, description: 'the run', schema: RUN_SCHEMA })
  get(@CurrentPrincipal() p: Principal, @Param('runId') runId: string) {
    return this.runs.get(p, runId);
  }

  @Post(':runId/complete')
  @HttpCode(200)
  @Roles('agent', 'admin')
  @ApiRoles(['agent', 'admin'], {
    note: `${RUN_SCOPE} An ops key reads runs, never ends them.`,
    summary: 'Complete a run',
    description: END_DESCRIPTION + ' Completing a completed run answers it again; completing a cancelled one is 409 RUN_NOT_ACTIVE.',
  })
  @ApiBody({ type: EndRunDto, required: false, description: 'optional: no body at all is the same as {}' })
  @ApiResponse({ status: 200, description: 'the run, status completed', schema: RUN_SCHEMA })
  @ApiProblemResponse(404, 'NOT_FOUND: no such run in the key’s org (to an agent key: no such run it started)')
  @ApiProblemResponse(409, 'RUN_NOT_ACTIVE: the run was cancelled')
  complete(@CurrentPrincipal() p: Principal, @Param('runId') runId: string, @Body() dto: EndRunDto) {
    return this.runs.end(p, runId, 'completed', dto.reason ?? null);
  }

  @Post(':runId/cancel')
  @HttpCode(200)
  @Roles('agent', 'admin')
  @ApiRoles(['agent', 'admin'], {
    note: `${RUN_SCOPE} An ops key reads runs, never ends them.`,
    summary: 'Cancel a run (stop an agent)',
    description: END_DESCRIPTION + ' Cancelling a cancelled run answers it again; cancelling a completed one is 409 RUN_NOT_ACTIVE.',
  })
  @ApiBody({ type: EndRunDto, required: false, description: 'optional: no body at all is the same as {}' })
  @ApiResponse({ status: 200, description: 'the run, status cancelled', schema: RUN_SCHEMA })
  @ApiProblemResponse(404, 'NOT_FOUND: no such run in the key’s org (to an agent key: no such run it started)')
  @ApiProblemResponse(409, 'RUN_NOT_ACTIVE: the run was completed')
  cancel(@CurrentPrincipal() p: Principal, @Param('runId') runId: string, @Body() dto: EndRunDto) {
    return this.runs.end(p, runId, 'cancelled', dto.reason ?? null);
  }

  @Get(':runId/tools')
  @Roles('agent', 'ops', 'admin')
  @ApiRoles(['agent', 'ops', 'admin'], RUN_SCOPE)
  @ApiResponse({
    status: 200,
    description: 'the tools the run’s manifest permits, ready to hand to the model: format=anthropic {name, description, input_schema} (the default), format=openai (Chat Completions) {type: "function", function: {name, description, parameters, strict: false}}, format=openai-responses (the Responses API) {type: "function", name, description, parameters, strict: false}. strict is false: one schema serves all of a tool\'s actions, and its optional params are not a strict-mode schema',
    schema: RUN_TOOLS_SCHEMA,
  })
  tools(@CurrentPrincipal() p: Principal, @Param('runId') runId: string, @Query() q: ToolsQuery) {
    return this.runs.tools(p, runId, q.format ?? 'anthropic');
  }
}
