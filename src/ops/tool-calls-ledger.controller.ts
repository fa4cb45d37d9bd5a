import { Controller, Get, Param, Query, Req } from '@nestjs/common';
import type { Request } from 'express';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import { ApiRoles, LEDGER_READERS } from '../common/http/api-roles.js';
import { beforeBackstop } from '../common/http/http-drain.js';
import type { Principal } from '../auth/principal.js';
import { ToolCallExportQuery, ToolCallListQuery } from './ops.dto.js';
import { EXPORT_CONTENT, TOOL_CALL_DETAIL_SCHEMA, TOOL_CALL_PAGE_SCHEMA } from './ops.schemas.js';
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
  @ApiRoles(['ops', 'admin'], LEDGER_READERS)
  @ApiResponse({ status: 200, description: 'one page of tool calls, newest first', schema: TOOL_CALL_PAGE_SCHEMA })
  list(@CurrentPrincipal() p: Principal, @Query() q: ToolCallListQuery) {
    return this.calls.list(p, q);
  }

  @Get('export')
  @Roles('ops', 'admin')
  @ApiRoles(['ops', 'admin'], {
    note: LEDGER_READERS,
    summary: 'Stream every matching tool call as NDJSON or CSV',
    description:
      'The list filters apply. CSV: a header row of the ToolCall field names, inputRedacted and outputRedacted as JSON text (a string in quotes), other objects as JSON, RFC 4180 quoting; ' +
      "a text cell starting with =, +, -, @, TAB or CR is prefixed with ' so spreadsheets do not evaluate it.",
  })
  // The media types are given as `content`: @ApiProduces only relabels responses documented with a `schema` or `type`,
  // and a route with no @ApiResponse gets a bare {200: {description: ''}} (so it never reached the document).
  @ApiResponse({
    status: 200,
    description: 'every matching tool call, newest first, as an attachment (tool-calls.ndjson or tool-calls.csv): the media type follows `format`',
    content: EXPORT_CONTENT,
    headers: {
      'Content-Disposition': {
        description: 'an attachment named for the format',
        schema: { type: 'string', enum: ['attachment; filename="tool-calls.ndjson"', 'attachment; filename="tool-calls.csv"'] },
      },
    },
  })
  export(@CurrentPrincipal() p: Principal, @Query() q: ToolCallExportQuery, @Req() req: Request) {
    // HTTP/1.0 (close-delimited): the drain's signal lets the export end with its incomplete line before the backstop.
    return this.calls.export(p, q, req.httpVersion === '1.0', beforeBackstop(req));
  }

  @Get(':id')
  @Roles('ops', 'admin')
  @ApiRoles(['ops', 'admin'], LEDGER_READERS)
  @ApiResponse({ status: 200, description: 'the ToolCall and its story: its ledger events, policy decision and approval', schema: TOOL_CALL_DETAIL_SCHEMA })
  get(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.calls.get(p, id);
  }
}
