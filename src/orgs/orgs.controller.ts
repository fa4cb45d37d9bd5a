import { Body, Controller, Get, Param, Post, Put } from '@nestjs/common';
import { ApiBearerAuth, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ADMIN_CHANGES_CONFIG, ApiRoles, OPS_READS_CONFIG } from '../common/http/api-roles.js';
import { ApiProblemResponse } from '../common/http/openapi.js';
import { CurrentPrincipal, PlatformKeyOnly, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { FeatureFlagsService, FLAG_DEFAULTS } from './feature-flags.service.js';
import { OrgScopeService } from './org-scope.service.js';
import { CreateOrgDto, SetFeatureFlagDto } from './orgs.dto.js';
import { ORGS_NEED_PLATFORM_ADMIN, OrgsService } from './orgs.service.js';

/** An org, as OrgsService answers it (POST /v1/orgs, GET /v1/orgs/{orgId}). */
const ORG_SCHEMA = {
  type: 'object',
  required: ['id', 'name', 'createdAt'],
  properties: { id: { type: 'string', format: 'uuid' }, name: { type: 'string' }, createdAt: { type: 'string', format: 'date-time' } },
};

/** Every flag of the org with its value, the default when never set (FeatureFlagsService.all; FLAG_DEFAULTS names them). */
const FLAGS_SCHEMA = {
  type: 'object',
  required: Object.keys(FLAG_DEFAULTS),
  properties: Object.fromEntries(
    Object.entries(FLAG_DEFAULTS).map(([flag, value]) => [flag, { type: 'boolean', description: `default ${String(value)}` }]),
  ),
};

/** The flag as set (FeatureFlagsService.set). */
const FLAG_SET_SCHEMA = {
  type: 'object',
  required: ['flag', 'enabled', 'updatedAt', 'updatedBy'],
  properties: {
    flag: { type: 'string', enum: Object.keys(FLAG_DEFAULTS) },
    enabled: { type: 'boolean' },
    updatedAt: { type: 'string', format: 'date-time' },
    updatedBy: { type: 'string', format: 'uuid', description: 'the id of the API key that set it' },
  },
};

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
  @PlatformKeyOnly(ORGS_NEED_PLATFORM_ADMIN)
  @ApiRoles(['admin'], {
    note: 'A platform admin key (orgId null) only; an org admin key answers 403.',
    forbiddenAlso: 'an org admin key — only a platform admin (orgId null) creates orgs',
  })
  @ApiResponse({ status: 201, description: 'the org', schema: ORG_SCHEMA })
  @ApiProblemResponse(409, 'CONFLICT: an org with this id already exists')
  create(@CurrentPrincipal() p: Principal, @Body() dto: CreateOrgDto) {
    return this.orgs.create(p, { name: dto.name, id: dto.id ?? undefined });
  }

  @Get(':orgId')
  @Roles('admin', 'ops')
  @ApiRoles(['admin', 'ops'], OPS_READS_CONFIG)
  @ApiResponse({ status: 200, description: 'the org', schema: ORG_SCHEMA })
  get(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string) {
    return this.orgs.get(p, orgId);
  }

  @Get(':orgId/feature-flags')
  @Roles('admin', 'ops')
  @ApiRoles(['admin', 'ops'], OPS_READS_CONFIG)
  @ApiResponse({ status: 200, description: 'every feature flag of the org: flag name → enabled (the default when never set)', schema: FLAGS_SCHEMA })
  async listFlags(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string) {
    await this.scope.assertAccess(p, orgId);
    return this.flags.all(orgId);
  }

  @Put(':orgId/feature-flags/:flag')
  @Roles('admin')
  @ApiRoles(['admin'], ADMIN_CHANGES_CONFIG)
  @ApiParam({ name: 'flag', enum: Object.keys(FLAG_DEFAULTS), description: 'another name answers 404 NOT_FOUND' })
  @ApiResponse({ status: 200, description: 'the flag as set; a feature_flag.changed event records the old and new value (also when they are equal: every PUT is an admin action on the audit trail, and it takes effect like a change, its reason and updatedBy replacing the earlier ones) and the reason’s SHA-256 (reasonDigest, lowercase hex of its UTF-8; null when none was given)', schema: FLAG_SET_SCHEMA })
  async setFlag(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string, @Param('flag') flag: string, @Body() dto: SetFeatureFlagDto) {
    await this.scope.assertAccess(p, orgId);
    return this.flags.set(p, orgId, flag, dto.enabled, dto.reason ?? undefined);
  }
}
