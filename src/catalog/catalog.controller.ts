import { Controller, Get } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ApiProblemResponse } from '../common/http/openapi.js';
import { ApiRoles } from '../common/http/api-roles.js';
import { RISK_LEVELS } from '../policy/policy.types.js';
import { Roles } from '../auth/auth.decorators.js';
import { ToolCatalogService } from './tool-catalog.service.js';

/** The catalog as the vendor handlers declare it (ToolSpec, ToolActionSpec in vendors/vendor-handler.ts). */
const CATALOG_SCHEMA = {
  type: 'object',
  required: ['items'],
  properties: {
    items: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'vendor', 'description', 'actions'],
        properties: {
          name: { type: 'string', example: 'order_lookup' },
          vendor: { type: 'string', enum: ['shopify', 'amazon', 'jumio', 'nango'] },
          description: { type: 'string' },
          actions: {
            type: 'array',
            items: {
              type: 'object',
              required: ['name', 'description', 'inputSchema', 'riskLevel', 'sideEffect', 'idempotent', 'costCents'],
              properties: {
                name: { type: 'string', example: 'lookup' },
                description: { type: 'string' },
                inputSchema: { type: 'object', additionalProperties: true, description: 'JSON Schema of the action’s params (without `action`)' },
                riskLevel: { type: 'string', enum: [...RISK_LEVELS] },
                sideEffect: { type: 'string', enum: ['read', 'write'] },
                idempotent: { type: 'boolean' },
                overwrite: { type: 'boolean', description: 'writes only' },
                costCents: { type: 'integer' },
                decimalParams: { type: 'array', items: { type: 'string' } },
                pathParams: { type: 'array', items: { type: 'string' } },
                textParams: { type: 'array', items: { type: 'string' } },
                unseenDefaults: {
                  type: 'object',
                  additionalProperties: { type: 'string' },
                  description: 'optional params whose absence stands for a value the policy cannot see, each with what leaving it out means',
                },
              },
            },
          },
        },
      },
    },
  },
};

@ApiTags('tools')
@ApiBearerAuth()
@Controller('v1/tools')
export class CatalogController {
  constructor(private readonly catalog: ToolCatalogService) {}

  @Get()
  @Roles('agent', 'ops', 'expert', 'admin')
  @ApiRoles(['agent', 'ops', 'expert', 'admin'], 'Every role: the catalog is the same for every org (what an org may call is its tool permissions).')
  @ApiResponse({
    status: 200,
    description:
      '{items: [{name, vendor, description, actions: [{name, description, inputSchema, riskLevel, sideEffect, idempotent, costCents, overwrite?, decimalParams?, pathParams?, textParams?, unseenDefaults?}]}]}. ' +
      '`decimalParams` names params that are decimal strings (a refund amount): policy rules compare them by value in eq, ne and in ("100" matches "100.00"). ' +
      '`pathParams` names params that are URL paths (a Nango path): eq, ne and in ignore one trailing "/". ' +
      '`textParams` names params whose values are sent as text (a Nango query): eq, ne and in also match the same text (false and "false"). ' +
      '`unseenDefaults` names optional params whose absence stands for a value the gateway learns only after the policy ran (a refund\'s ' +
      '`currency`: the order\'s), each with what leaving it out means: a policy rule\'s eq, ne or in on one needs an exists condition on it first. ' +
      'Writes also say `overwrite`: true when a second call with the same input leaves the same state (the order note), so a write answered 5xx ' +
      'is failed; false when it would be a second side effect (a refund, a Nango POST), so a 5xx leaves it indeterminate / OUTCOME_UNKNOWN.',
    schema: CATALOG_SCHEMA,
  })
  @ApiProblemResponse(400, 'VALIDATION_FAILED: the route takes no query parameters; any one is refused, naming it')
  // No query parameters: any one is 400 VALIDATION_FAILED (AuthGuard: on every route that declares none).
  list() {
    return { items: this.catalog.list() };
  }
}
