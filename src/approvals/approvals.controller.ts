import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ApiProblemResponse } from '../common/http/openapi.js';
import { APPROVAL_PAGE_SCHEMA, APPROVAL_SCHEMA } from '../ops/ops.schemas.js';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { DecideApprovalDto, ListApprovalsQuery } from './approvals.dto.js';
import { ApprovalsService } from './approvals.service.js';

@ApiTags('approvals')
@ApiBearerAuth()
@Controller('v1/approvals')
export class ApprovalsController {
  constructor(private readonly approvals: ApprovalsService) {}

  @Get()
  @Roles('expert', 'admin', 'ops', 'agent')
  @ApiResponse({ status: 200, description: 'one page of approvals, newest first (an agent key sees the client ones only)', schema: APPROVAL_PAGE_SCHEMA })
  list(@CurrentPrincipal() p: Principal, @Query() q: ListApprovalsQuery) {
    return this.approvals.list(p, q);
  }

  @Get(':id')
  @Roles('expert', 'admin', 'ops', 'agent')
  @ApiResponse({ status: 200, description: 'the approval', schema: APPROVAL_SCHEMA })
  get(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.approvals.get(p, id);
  }

  @Post(':id/decision')
  @HttpCode(200)
  @Roles('expert', 'admin', 'agent')
  @ApiResponse({
    status: 200,
    description:
      'the approval, decided; an approved call runs next (the agent reads its result at GET /v1/tool-calls/{id}/result) unless the org now refuses it: ' +
      'tool_calling_enabled turned off → blocked / FEATURE_DISABLED; its current policy blocks the action → blocked / POLICY_BLOCKED',
    schema: APPROVAL_SCHEMA,
  })
  @ApiProblemResponse(403, 'FORBIDDEN: a client approval decided with an expert key (expert approvals: expert or admin keys; client approvals: agent or admin keys)')
  @ApiProblemResponse(404, 'NOT_FOUND: no such approval in the key’s org, or one the key may not see (an expert approval, to an agent key)')
  @ApiProblemResponse(
    409,
    'ACTION_DIGEST_MISMATCH: actionDigest is not the digest of the action awaiting approval; ' +
      'APPROVAL_ALREADY_DECIDED: the approval is no longer pending (decided, by someone else first, or expired)',
  )
  decide(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Body() dto: DecideApprovalDto) {
    return this.approvals.decide(p, id, dto);
  }
}
