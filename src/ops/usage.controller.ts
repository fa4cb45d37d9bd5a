import { Controller, Get, Param, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import { ApiRoles, LEDGER_READERS } from '../common/http/api-roles.js';
import { PROBLEM_CONTENT } from '../common/http/openapi.js';
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
  @ApiResponse({
    status: 400,
    description:
      'VALIDATION_FAILED: a bad `from`/`to`; or, "from/to: this window holds more of the org\'s calls than the database adds up within its ' +
      'statement timeout", a window too large to add up (tens of millions of calls): ask for narrower windows and add their answers. ' +
      'A 503 DATABASE_UNAVAILABLE (a lock held on the calls, the database away) is to retry',
    content: PROBLEM_CONTENT,
  })
  byTool(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string, @Query() q: UsageQuery) {
    return this.usage.byTool(p, orgId, q);
  }
}
