import { Controller, Get, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators.js';
import { NoQueryParameters } from './catalog.query.js';
import { ToolCatalogService } from './tool-catalog.service.js';

@ApiTags('tools')
@ApiBearerAuth()
@Controller('v1/tools')
export class CatalogController {
  constructor(private readonly catalog: ToolCatalogService) {}

  @Get()
  @Roles('agent', 'ops', 'expert', 'admin')
  @ApiResponse({
    status: 200,
    description:
      '{items: [{name, vendor, description, actions: [{name, description, inputSchema, riskLevel, sideEffect, idempotent, costCents, overwrite?, decimalParams?}]}]}. ' +
      '`decimalParams` names params that are decimal strings (a refund amount): policy rules compare them by value in eq, ne and in ("100" matches "100.00"). ' +
      'Writes also say `overwrite`: true when a second call with the same input leaves the same state (the order note), so a write answered 5xx ' +
      'is failed; false when it would be a second side effect (a refund, a Nango POST), so a 5xx leaves it indeterminate / OUTCOME_UNKNOWN.',
  })
  // No query parameters: an unknown one is 400 VALIDATION_FAILED, as on every route with a query DTO.
  list(@Query(NoQueryParameters) _query: Record<string, never>) {
    return { items: this.catalog.list() };
  }
}
