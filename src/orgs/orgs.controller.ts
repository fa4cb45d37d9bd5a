import { Body, Controller, Get, Param, Post, Put } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ApiProblemResponse } from '../common/http/openapi.js';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { FeatureFlagsService } from './feature-flags.service.js';
import { OrgScopeService } from './org-scope.service.js';
import { CreateOrgDto, SetFeatureFlagDto } from './orgs.dto.js';
import { OrgsService } from './orgs.service.js';

@ApiTags('orgs')
@ApiBearerAuth()
@Controller('v1/orgs')
export class OrgsController {
  constructor(
    private readonly orgs: OrgsService,
    private readonly flags: FeatureFlagsService,
    private readonly scope: OrgScopeService,
  ) {}

  @Post()
  @Roles('admin')
  @ApiResponse({
    status: 201,
    description: 'the org',
    schema: {
      type: 'object',
      required: ['id', 'name', 'createdAt'],
      properties: { id: { type: 'string', format: 'uuid' }, name: { type: 'string' }, createdAt: { type: 'string', format: 'date-time' } },
    },
  })
  @ApiProblemResponse(409, 'CONFLICT: an org with this id already exists')
  create(@CurrentPrincipal() p: Principal, @Body() dto: CreateOrgDto) {
    return this.orgs.create(p, dto);
  }

  @Get(':orgId')
  @Roles('admin', 'ops')
  get(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string) {
    return this.orgs.get(p, orgId);
  }

  @Get(':orgId/feature-flags')
  @Roles('admin', 'ops')
  async listFlags(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string) {
    await this.scope.assertAccess(p, orgId);
    return this.flags.all(orgId);
  }

  @Put(':orgId/feature-flags/:flag')
  @Roles('admin')
  async setFlag(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string, @Param('flag') flag: string, @Body() dto: SetFeatureFlagDto) {
    await this.scope.assertAccess(p, orgId);
    return this.flags.set(p, orgId, flag, dto.enabled, dto.reason);
  }
}
