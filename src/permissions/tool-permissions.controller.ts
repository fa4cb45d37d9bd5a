import { Body, Controller, Get, Headers, Param, Put, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiHeader, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import { ADMIN_CHANGES_CONFIG, ApiRoles, OPS_READS_CONFIG } from '../common/http/api-roles.js';
import { EvaluatesIfMatch } from '../common/http/conditional-writes.guard.js';
import { ETAG_HEADER, IF_MATCH_HEADER, NOT_MODIFIED, parsePreconditions, quoted } from '../common/http/if-match.js';
import { ApiSetIfNoneMatchOnRead, ApiSetPreconditions } from '../common/http/openapi.js';
import type { Principal } from '../auth/principal.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { PutToolPermissionsDto } from './tool-permissions.dto.js';
import { permissionsTag, ToolPermissionsService } from './tool-permissions.service.js';

/** The org's permission rows (ToolPermissionsService.list): by toolName, action, then the org-wide row before the specialists'. */
const PERMISSIONS_SCHEMA = {
  type: 'object',
  required: ['items'],
  properties: {
    items: {
      type: 'array',
      items: {
        type: 'object',
        required: ['toolName', 'action', 'specialistId', 'enabled'],
        properties: {
          toolName: { type: 'string', example: 'order_lookup' },
          action: { type: 'string', example: 'lookup' },
          specialistId: { type: 'string', nullable: true, description: 'null = every specialist of the org; a specialist row overrides the org-wide one' },
          enabled: { type: 'boolean' },
        },
      },
    },
  },
};

@ApiTags('tool-permissions')
@ApiBearerAuth()
@Controller('v1/orgs/:orgId/tool-permissions')
export class ToolPermissionsController {
  constructor(
    private readonly permissions: ToolPermissionsService,
    private readonly scope: OrgScopeService,
  ) {}

  @Get()
  @Roles('admin', 'ops')
  @ApiRoles(['admin', 'ops'], OPS_READS_CONFIG)
  @ApiResponse({
    status: 200,
    description: 'the org’s permission rows, ordered by toolName, action, then specialistId (org-wide first); ETag: the set’s tag, for If-Match on PUT',
    schema: PERMISSIONS_SCHEMA,
    headers: { ETag: ETAG_HEADER },
  })
  @ApiResponse(NOT_MODIFIED)
  @ApiSetIfNoneMatchOnRead()
  async list(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string, @Res({ passthrough: true }) res: Response) {
    await this.scope.assertAccess(p, orgId);
    const items = await this.permissions.list(orgId);
    res.setHeader('ETag', quoted(permissionsTag(items)));
    return { items };
  }

  @EvaluatesIfMatch()
  @Put()
  @Roles('admin')
  @ApiRoles(['admin'], ADMIN_CHANGES_CONFIG)
  @ApiHeader(IF_MATCH_HEADER)
  @ApiResponse({
    status: 200,
    description:
      'the new set, as GET answers it (the rows given replace every earlier row), with its ETag. Event tool_permissions.changed ' +
      'records count, enabled, setTag (the new set’s ETag, unquoted; ledger verify holds the rows to the last one) and the rows added, removed and flipped',
    schema: PERMISSIONS_SCHEMA,
    headers: { ETag: ETAG_HEADER },
  })
  @ApiSetPreconditions()
  async replace(
    @CurrentPrincipal() p: Principal,
    @Param('orgId') orgId: string,
    @Body() dto: PutToolPermissionsDto,
    @Headers('if-match') ifMatch: string | undefined,
    @Headers('if-none-match') ifNoneMatch: string | undefined,
    @Res({ passthrough: true }) res: Response,
  ) {
    await this.scope.assertAccess(p, orgId);
    const items = await this.permissions.replace(p, orgId, dto.items, parsePreconditions(ifMatch, ifNoneMatch));
    res.setHeader('ETag', quoted(permissionsTag(items)));
    return { items };
  }
}
