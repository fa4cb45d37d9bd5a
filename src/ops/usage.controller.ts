import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import { ApiRoles, LEDGER_READERS } from '../common/http/api-roles.js';
import type { Principal } from '../auth/principal.js';
import { UsageQuery } from './ops.dto.js';
import { USAGE_SCHEMA } from './ops.schemas.js';
import { UsageService } from './usage.service.js';

@ApiTags('ledger')
@ApiBearerAuth()
@Controller('v1/orgs/:orgId/usage')
export class UsageController {
  constructor(private readonly usage: UsageService) {}

  @Get()
  @Roles('ops', 'admin')
  @ApiRoles(['ops', 'admin'], LEDGER_READERS)
  @ApiResponse({ status: 200, description: 'calls and cost per tool and action, from the tool-call ledger; `from` ≤ createdAt < `to`', schema: USAGE_SCHEMA })
  byTool(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string, @Query() q: UsageQuery) {
    return this.usage.byTool(p, orgId, q);
  }
}
