import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ApiRoles } from '../common/http/api-roles.js';
import { ApiProblemResponse } from '../common/http/openapi.js';
import { APPROVAL_PAGE_SCHEMA, APPROVAL_SCHEMA } from '../ops/ops.schemas.js';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { DecideApprovalDto, ListApprovalsQuery } from './approvals.dto.js';
import { ApprovalsService } from './approvals.service.js';

/** ApprovalsService.maySee: an agent relays the client's decisions, never an expert's; the other roles see both kinds. */
const AGENT_SEES_CLIENT_ONLY =
  'An agent key sees client approvals only, of every run of its org, whichever agent key started the run (API.md §9); an expert one is 404 ' +
  'like a missing one, a listing leaves them out, and kind=expert is an empty page. Expert, admin and ops keys see both kinds, of every run of their org.';
/** ApprovalsService.mayDecide. */
const WHO_DECIDES = 'Expert approvals: expert or admin keys decide them; client approvals: any agent key of the run’s org (not only the one that started the run) or admin keys.';

@ApiTags('approvals')
@ApiBearerAuth()
@Controller('v1/approvals')
export class ApprovalsController {
  constructor(private readonly approvals: ApprovalsService) {}

  @Get()
  @Roles('expert', 'admin', 'ops', 'agent')
  @ApiRoles(['expert', 'admin', 'ops', 'agent'], `${AGENT_SEES_CLIENT_ONLY} ${WHO_DECIDES}`)
  @ApiResponse({
    status: 200,
    description:
      'one page of approvals, newest first (an agent key sees the client ones only, of every run of its org). A page of large approvals ' +
      'ends before `limit` items, with a nextCursor, once its rows hold 16 MiB of redacted input (inputRedacted), as the tool-call ' +
      'listing does; it still holds at least one, and nextCursor continues after the last one returned',
    schema: APPROVAL_PAGE_SCHEMA,
  })
  list(@CurrentPrincipal() p: Principal, @Query() q: ListApprovalsQuery) {
    return this.approvals.list(p, q);
  }

  @Get(':id')
  @Roles('expert', 'admin', 'ops', 'agent')
  @ApiRoles(['expert', 'admin', 'ops', 'agent'], `${AGENT_SEES_CLIENT_ONLY} ${WHO_DECIDES}`)
  @ApiResponse({ status: 200, description: 'the approval', schema: APPROVAL_SCHEMA })
  get(@CurrentPrincipal() p: Principal, @Param('id') id: string) {
    return this.approvals.get(p, id);
  }

  @Post(':id/decision')
  @HttpCode(200)
  @Roles('expert', 'admin', 'agent')
  @ApiRoles(['expert', 'admin', 'agent'], {
    note: `${WHO_DECIDES} An ops key reads approvals but decides none; an agent key gets 404 on an expert approval (it may not see it).`,
    forbiddenAlso:
      'a key that may see the approval but not decide its kind (an expert key deciding a client approval); an approve of an expert approval with the key that asked for its call or started its run (four eyes: it may reject)',
  })
  @ApiResponse({
    status: 200,
    description:
      'the approval, decided; an approved call runs next (the agent reads its result at GET /v1/tool-calls/{id}/result) unless the org now refuses it: ' +
      'tool_calling_enabled turned off → blocked / FEATURE_DISABLED; its current policy blocks the action → blocked / POLICY_BLOCKED',
    schema: APPROVAL_SCHEMA,
  })
  @ApiProblemResponse(
    404,
    'NOT_FOUND: no such approval in the key’s org, or one the key may not see (to an agent key: an expert approval; nothing is decided)',
  )
  @ApiProblemResponse(
    409,
    'ACTION_DIGEST_MISMATCH: actionDigest is not the digest of the action awaiting approval, or (approve) the approval shown ' +
      'is not that action: its tool, action, redacted input or digest differ from its call’s; ' +
      'APPROVAL_ALREADY_DECIDED: the approval is no longer pending (decided, by someone else first, or expired)',
  )
  decide(@CurrentPrincipal() p: Principal, @Param('id') id: string, @Body() dto: DecideApprovalDto) {
    return this.approvals.decide(p, id, dto);
  }
}
