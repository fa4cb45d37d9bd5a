import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiProduces, ApiTags } from '@nestjs/swagger';
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
  @ApiOperation({
    summary: 'Stream every matching tool call as NDJSON or CSV',
    description:
      'The list filters apply. CSV: a header row of the ToolCall field names, objects as JSON cells, RFC 4180 quoting; ' +
      "a text cell starting with =, +, -, @, TAB or CR is prefixed with ' so spreadsheets do not evaluate it.",
  })
  export(@CurrentPrincipal() p: Principal, @Query() q: ToolCallExportQuery) {
    return this.calls.export(p, q);
  }

  @Get(':id')
  @Roles('ops', 'admin')
  get(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.calls.get(p, id);
  }
}
