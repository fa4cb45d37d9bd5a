import { Body, Controller, Get, Param, Put } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import { ADMIN_CHANGES_CONFIG, ApiRoles, OPS_READS_CONFIG } from '../common/http/api-roles.js';
import type { Principal } from '../auth/principal.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { PutToolPermissionsDto } from './tool-permissions.dto.js';
import { ToolPermissionsService } from './tool-permissions.service.js';

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
  @ApiResponse({ status: 200, description: 'the org’s permission rows, ordered by toolName, action, then specialistId (org-wide first)', schema: PERMISSIONS_SCHEMA })
  async list(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string) {
    await this.scope.assertAccess(p, orgId);
    return { items: await this.permissions.list(orgId) };
  }

  @Put()
  @Roles('admin')
  @ApiRoles(['admin'], ADMIN_CHANGES_CONFIG)
  @ApiResponse({ status: 200, description: 'the new set, as GET answers it (the rows given replace every earlier row; event tool_permissions.changed)', schema: PERMISSIONS_SCHEMA })
  async replace(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string, @Body() dto: PutToolPermissionsDto) {
    await this.scope.assertAccess(p, orgId);
    return { items: await this.permissions.replace(p, orgId, dto.items) };
  }
}
