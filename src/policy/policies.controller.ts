import { Body, Controller, Get, Headers, Param, Put, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiHeader, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import { ADMIN_CHANGES_CONFIG, ApiRoles, OPS_READS_CONFIG } from '../common/http/api-roles.js';
import { EvaluatesIfMatch } from '../common/http/conditional-writes.guard.js';
import { ETAG_HEADER, IF_MATCH_HEADER, NOT_MODIFIED, parsePreconditions, quoted } from '../common/http/if-match.js';
import { ApiSetIfNoneMatchOnRead, ApiSetPreconditions } from '../common/http/openapi.js';
import type { Principal } from '../auth/principal.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { PoliciesService, policyTag } from './policies.service.js';
import { TOOL_NAME_PATTERN } from './policy-rules.validator.js';
import { CONDITION_OPS, FORBIDDEN_PATH_SEGMENTS, NUMERIC_OPS, PATH_SEGMENT_PATTERN, POLICY_DECISIONS, POLICY_LIMITS, RISK_LEVELS, RULE_ID_PATTERN } from './policy.types.js';

const SEGMENT = PATH_SEGMENT_PATTERN.source.slice(1, -1); // [A-Za-z0-9_$-]+

/**
 * A rule as validatePolicyRules keeps it (policy.types.ts PolicyRule): absent fields are left out, never null.
 * Closed at every level and bounded as the validator is, so the document refuses what the server refuses (400);
 * what a schema cannot say (a catalog name, a param the action takes, a value's nesting) is in the descriptions.
 */
const POLICY_RULE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'decision'],
  properties: {
    id: { type: 'string', pattern: RULE_ID_PATTERN.source, maxLength: POLICY_LIMITS.maxIdLength, example: 'big-refunds', description: 'unique within the rules' },
    match: {
      type: 'object',
      additionalProperties: false,
      description: 'every field optional; a rule without match applies to every call',
      properties: {
        toolName: {
          type: 'string',
          pattern: TOOL_NAME_PATTERN.source,
          description: '"tool.action" or "tool.*", naming an action or tool of the catalog (GET /v1/tools)',
          example: 'shopify_refund.create',
        },
        riskLevel: { type: 'string', enum: [...RISK_LEVELS], description: 'compared with the catalog risk of the action' },
        where: {
          type: 'array',
          maxItems: POLICY_LIMITS.maxConditionsPerRule,
          description: 'all must hold',
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['path', 'op'],
            properties: {
              path: {
                type: 'string',
                maxLength: POLICY_LIMITS.maxPathLength,
                pattern: `^${SEGMENT}(?:\\.${SEGMENT}){0,${POLICY_LIMITS.maxPathSegments - 1}}$`,
                description:
                  `dot path into the params, at most ${POLICY_LIMITS.maxPathSegments} segments of A-Z a-z 0-9 _ $ - (not ${[...FORBIDDEN_PATH_SEGMENTS].join(', ')}); ` +
                  'its first segment must be a param of an action the rule matches',
                example: 'amount',
              },
              op: { type: 'string', enum: [...CONDITION_OPS] },
              value: {
                description:
                  `any JSON value nested at most ${POLICY_LIMITS.maxValueDepth} levels: required except for exists (a boolean, absent meaning true); ` +
                  `a number or decimal string for ${NUMERIC_OPS.join(', ')}; an array of at most ${POLICY_LIMITS.maxInValues} items for in. ` +
                  'eq, ne and in: two strings compare as text; a number equals its own decimal text (12 and "12"); a number and a text spelling it ' +
                  'otherwise (12 and "0012", "+12", "1.2e1", 100 and "100.00") cannot be evaluated, so the rule blocks the call, unless an in list also holds the ' +
                  'call\'s own spelling (declared decimalParams compare by value); so do a boolean and a lenient text of it in a textParam (true and "True", "1", "on"), ' +
                  'two texts alike only after NFKC normalisation, and two pathParams alike but for letter case. ' +
                  `${NUMERIC_OPS.join(', ')} on a call without the param cannot be evaluated either (the rule blocks it): a PUT whose comparison names a param ` +
                  'some matched action never takes is refused unless an exists condition on the same path comes first. ' +
                  'So is an eq, ne or in on a param a matched action lists in its catalog unseenDefaults (a refund\'s currency, a kyc accountId: ' +
                  'left out, the vendor or the credentials fill in a value the policy cannot see) with no exists condition on the same path before it, ' +
                  'and a rule an earlier rule with no where shadows (its toolName and riskLevel cover the later rule\'s: first match wins)',
              },
            },
          },
        },
      },
    },
    decision: { type: 'string', enum: [...POLICY_DECISIONS] },
    riskLevel: { type: 'string', enum: [...RISK_LEVELS], description: 'overrides the catalog risk in the recorded decision' },
    reason: {
      type: 'string',
      maxLength: POLICY_LIMITS.maxReasonLength,
      description: "kept redacted as a tool's input is (a card number or token in it is [REDACTED]), and so copied to every decision and approval the rule makes; at most 500 characters once redacted",
    },
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
    unusable: {
      type: 'array',
      items: { type: 'string' },
      description:
        'only when the stored rules are not valid (a row edited by hand; `rules` then shows them as stored, or [] when they are no list): ' +
        'what is wrong, and that every tool call of the org is blocked POLICY_BLOCKED until valid rules are PUT',
    },
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
  @ApiRoles(['admin', 'ops'], OPS_READS_CONFIG)
  @ApiResponse({
    status: 200,
    description: 'the org’s rules ({rules: [], version: 0, updatedAt: null} when never set); ETag: the version’s tag, for If-Match on PUT',
    schema: POLICY_SCHEMA,
    headers: { ETag: ETAG_HEADER },
  })
  @ApiResponse(NOT_MODIFIED)
  @ApiSetIfNoneMatchOnRead()
  async get(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string, @Res({ passthrough: true }) res: Response) {
    await this.scope.assertAccess(p, orgId);
    const view = await this.policies.get(orgId);
    res.setHeader('ETag', quoted(policyTag(view.version)));
    return view;
  }

  @Put()
  @Roles('admin')
  @ApiRoles(['admin'], ADMIN_CHANGES_CONFIG)
  @ApiBody({
    description: 'Ordered rules, first match wins (API.md §2). A bad rule → 400 naming it.',
    schema: { type: 'object', required: ['rules'], properties: { rules: { type: 'array', maxItems: POLICY_LIMITS.maxRules, items: POLICY_RULE_SCHEMA } } },
  })
  @EvaluatesIfMatch()
  @ApiHeader(IF_MATCH_HEADER)
  @ApiResponse({ status: 200, description:
      'the rules as stored, with the new version and its ETag. Event policy.changed records the version, ruleCount, ruleIds, ' +
      'rulesDigest (SHA-256, lowercase hex, of the canonical JSON of the rules as stored: keys sorted, no spaces) and rules: ' +
      'each rule as stored but with its reason as reasonDigest (SHA-256 of its UTF-8) and each eq/ne/in value as valueDigest ' +
      '(SHA-256 of its canonical JSON), as they may hold personal text; gt/gte/lt/lte and exists values stay as written', schema: POLICY_SCHEMA, headers: { ETag: ETAG_HEADER } })
  @ApiSetPreconditions()
  async replace(
    @CurrentPrincipal() p: Principal,
    @Param('orgId') orgId: string,
    @Body() body: Record<string, unknown>,
    @Headers('if-match') ifMatch: string | undefined,
    @Headers('if-none-match') ifNoneMatch: string | undefined,
    @Res({ passthrough: true }) res: Response,
  ) {
    await this.scope.assertAccess(p, orgId);
    const view = await this.policies.replace(p, orgId, body, parsePreconditions(ifMatch, ifNoneMatch));
    res.setHeader('ETag', quoted(policyTag(view.version)));
    return view;
  }
}
