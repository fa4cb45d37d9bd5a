import { Body, Controller, Get, Param, Put } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { PutToolPermissionsDto } from './tool-permissions.dto.js';
import { ToolPermissionsService } from './tool-permissions.service.js';

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
  async list(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string) {
    await this.scope.assertAccess(p, orgId);
    return { items: await this.permissions.list(orgId) };
  }

  @Put()
  @Roles('admin')
  async replace(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string, @Body() dto: PutToolPermissionsDto) {
    await this.scope.assertAccess(p, orgId);
    return { items: await this.permissions.replace(p, orgId, dto.items) };
  }
}
