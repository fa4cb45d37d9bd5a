import { Body, Controller, Get, Param, Put } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { PoliciesService } from './policies.service.js';

@ApiTags('policies')
@ApiBearerAuth()
@Controller('v1/orgs/:orgId/policies')
export class PoliciesController {
  constructor(
    private readonly policies: PoliciesService,
    private readonly scope: OrgScopeService,
  ) {}

  @Get()
  @Roles('admin', 'ops')
  async get(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string) {
    await this.scope.assertAccess(p, orgId);
    return this.policies.get(orgId);
  }

  @Put()
  @Roles('admin')
  @ApiBody({
    description: 'Ordered rules, first match wins (API.md §2). A bad rule → 400 naming it.',
    schema: { type: 'object', required: ['rules'], properties: { rules: { type: 'array', items: { type: 'object' } } } },
  })
  async replace(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string, @Body() body: Record<string, unknown>) {
    await this.scope.assertAccess(p, orgId);
    return this.policies.replace(p, orgId, body);
  }
}
