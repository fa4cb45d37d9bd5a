import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiProduces, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { ToolCallExportQuery, ToolCallListQuery } from './ops.dto.js';
import { ToolCallsQueryService } from './tool-calls-query.service.js';

/**
 * Ops' view of the tool-call ledger (API.md §6). `export` is declared before
 * `:id` so it is not taken for an id; the agent routes `:id/result` and
 * `:id/reconcile` live with the pipeline's controller.
 */
@ApiTags('ledger')
@ApiBearerAuth()
@Controller('v1/tool-calls')
export class ToolCallsLedgerController {
  constructor(private readonly calls: ToolCallsQueryService) {}

  @Get()
  @Roles('ops', 'admin')
  list(@CurrentPrincipal() p: Principal, @Query() q: ToolCallListQuery) {
    return this.calls.list(p, q);
  }

  @Get('export')
  @Roles('ops', 'admin')
  @ApiProduces('application/x-ndjson', 'text/csv')
  export(@CurrentPrincipal() p: Principal, @Query() q: ToolCallExportQuery) {
    return this.calls.export(p, q);
  }

  @Get(':id')
  @Roles('ops', 'admin')
  get(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.calls.get(p, id);
  }
}
