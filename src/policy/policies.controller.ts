import { Body, Controller, Get, Param, Put } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { PoliciesService } from './policies.service.js';
import { CONDITION_OPS, POLICY_DECISIONS, POLICY_LIMITS, RISK_LEVELS } from './policy.types.js';

/** A rule as validatePolicyRules keeps it (policy.types.ts PolicyRule): absent fields are left out, never null. */
const POLICY_RULE_SCHEMA = {
  type: 'object',
  required: ['id', 'decision'],
  properties: {
    id: { type: 'string', pattern: '^[A-Za-z0-9_.:-]{1,100}$', example: 'big-refunds' },
    match: {
      type: 'object',
      description: 'every field optional; a rule without match applies to every call',
      properties: {
        toolName: { type: 'string', description: '"tool.action" or "tool.*"', example: 'shopify_refund.create' },
        riskLevel: { type: 'string', enum: [...RISK_LEVELS], description: 'compared with the catalog risk of the action' },
        where: {
          type: 'array',
          maxItems: POLICY_LIMITS.maxConditionsPerRule,
          description: 'all must hold',
          items: {
            type: 'object',
            required: ['path', 'op'],
            properties: {
              path: { type: 'string', description: 'dot path into the params; its first segment must be a param of an action the rule matches', example: 'amount' },
              op: { type: 'string', enum: [...CONDITION_OPS] },
              value: { description: 'any JSON value; an array for in, a boolean (or absent) for exists' },
            },
          },
        },
      },
    },
    decision: { type: 'string', enum: [...POLICY_DECISIONS] },
    riskLevel: { type: 'string', enum: [...RISK_LEVELS], description: 'overrides the catalog risk in the recorded decision' },
    reason: { type: 'string', maxLength: POLICY_LIMITS.maxReasonLength },
  },
};

/** PoliciesService.get and .replace. */
const POLICY_SCHEMA = {
  type: 'object',
  required: ['rules', 'version', 'updatedAt'],
  properties: {
    rules: { type: 'array', items: POLICY_RULE_SCHEMA, description: 'ordered, first match wins' },
    version: { type: 'integer', minimum: 0, description: '0 while the org has never set a policy; +1 on every PUT' },
    updatedAt: { type: 'string', format: 'date-time', nullable: true, description: 'null while the org has never set a policy' },
  },
};

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
  @ApiResponse({ status: 200, description: 'the org’s rules ({rules: [], version: 0, updatedAt: null} when never set)', schema: POLICY_SCHEMA })
  async get(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string) {
    await this.scope.assertAccess(p, orgId);
    return this.policies.get(orgId);
  }

  @Put()
  @Roles('admin')
  @ApiBody({
    description: 'Ordered rules, first match wins (API.md §2). A bad rule → 400 naming it.',
    schema: { type: 'object', required: ['rules'], properties: { rules: { type: 'array', maxItems: POLICY_LIMITS.maxRules, items: POLICY_RULE_SCHEMA } } },
  })
  @ApiResponse({ status: 200, description: 'the rules as stored, with the new version (event policy.changed)', schema: POLICY_SCHEMA })
  async replace(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string, @Body() body: Record<string, unknown>) {
    await this.scope.assertAccess(p, orgId);
    return this.policies.replace(p, orgId, body);
  }
}
