import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { UsageQuery } from './ops.dto.js';
import { UsageService } from './usage.service.js';

@ApiTags('ledger')
@ApiBearerAuth()
@Controller('v1/orgs/:orgId/usage')
export class UsageController {
  constructor(private readonly usage: UsageService) {}

  @Get()
  @Roles('ops', 'admin')
  byTool(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string, @Query() q: UsageQuery) {
    return this.usage.byTool(p, orgId, q);
  }
}
