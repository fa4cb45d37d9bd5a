import { Body, Controller, Get, Param, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { PROBLEM_SCHEMA } from '../common/http/openapi.js';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { CreateRunDto, ToolsQuery } from './runs.dto.js';
import { RunsService } from './runs.service.js';

@ApiTags('runs')
@ApiBearerAuth()
@Controller('v1/runs')
export class RunsController {
  constructor(private readonly runs: RunsService) {}

  @Post()
  @Roles('agent', 'admin')
  @ApiOperation({
    summary: 'Start a run',
    description:
      'For agent keys and admin keys of an org: the run belongs to the key’s org. ' +
      'A platform key (orgId null) belongs to no org and cannot create runs: 403 FORBIDDEN (use an admin key of the org).',
  })
  @ApiResponse({ status: 403, description: 'FORBIDDEN: not an agent or admin key, or a platform key (orgId null)', schema: PROBLEM_SCHEMA })
  create(@CurrentPrincipal() p: Principal, @Body() dto: CreateRunDto) {
    return this.runs.create(p, dto);
  }

  @Get(':runId')
  @Roles('agent', 'ops', 'admin')
  get(@CurrentPrincipal() p: Principal, @Param('runId') runId: string) {
    return this.runs.get(p, runId);
  }

  @Get(':runId/tools')
  @Roles('agent', 'ops', 'admin')
  tools(@CurrentPrincipal() p: Principal, @Param('runId') runId: string, @Query() q: ToolsQuery) {
    return this.runs.tools(p, runId, q.format ?? 'anthropic');
  }
}
