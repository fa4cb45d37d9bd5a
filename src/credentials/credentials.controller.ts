import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Put } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiHeader, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import { ApiRoles } from '../common/http/api-roles.js';
import { EvaluatesIfMatch } from '../common/http/conditional-writes.guard.js';
import { parsePreconditions } from '../common/http/if-match.js';
import { ApiProblemResponse } from '../common/http/openapi.js';
import type { Principal } from '../auth/principal.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { CREDENTIAL_SCHEMAS } from './credential-schemas.js';
import { credentialPrecondition, CredentialsService } from './credentials.service.js';
import { INTEGRATION_TYPES } from './integration-credential.entity.js';

/** CredentialsService's view of stored credentials: never the config, only which key encrypted it and its fingerprint. */
const CREDENTIAL_VIEW_SCHEMA = {
  type: 'object',
  required: ['integrationType', 'keyId', 'fingerprint', 'updatedAt'],
  properties: {
    integrationType: { type: 'string', enum: [...INTEGRATION_TYPES] },
    keyId: { type: 'string', description: 'the master key that encrypted the config' },
    fingerprint: {
      type: 'string',
      example: 'hmac-v2:0123456789abcdef',
      description: 'a keyed hash of the config, bound to the org and integration, safe to show: under one master key, equal fingerprints of one org and integration mean equal configs',
    },
    updatedAt: { type: 'string', format: 'date-time' },
  },
};

/** The {type} of a credentials route: an integration type; another answers 404 NOT_FOUND (CredentialsService.assertType). */
const ApiIntegrationTypeParam = (): MethodDecorator =>
  ApiParam({ name: 'type', enum: [...INTEGRATION_TYPES], description: 'the integration; another value answers 404 NOT_FOUND' });

/** OrgScopeService.assertAccess: an org admin its own org, the platform admin any; nobody else touches credentials. */
const CREDENTIALS_ADMIN = 'An org admin key for its own org (another org → 404), a platform admin key (orgId null) for any; ops keys may not read credentials either.';

@ApiTags('credentials')
@ApiBearerAuth()
@Controller('v1/orgs/:orgId/integrations')
export class CredentialsController {
  constructor(
    private readonly credentials: CredentialsService,
    private readonly scope: OrgScopeService,
  ) {}

  @Get()
  @Roles('admin')
  @ApiRoles(['admin'], CREDENTIALS_ADMIN)
  @ApiResponse({
    status: 200,
    description: 'the integrations with stored credentials, by integrationType (never a secret)',
    schema: { type: 'object', required: ['items'], properties: { items: { type: 'array', items: CREDENTIAL_VIEW_SCHEMA } } },
  })
  async list(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string) {
    await this.scope.assertAccess(p, orgId);
    return { items: await this.credentials.list(orgId) };
  }

  @Put(':type/credentials')
  @Roles('admin')
  @ApiRoles(['admin'], CREDENTIALS_ADMIN)
  @ApiIntegrationTypeParam()
  @ApiBody({
    description:
      'write-only: {config: {...}}, the config of the integration type in the path (API.md §7); never echoed. Shopify takes `accessToken`, ' +
      'or `clientId` + `clientSecret` (a Dev Dashboard app: the gateway buys ~24 h tokens), plus `refreshToken` for a public app\'s ' +
      'expiring offline token (the gateway refreshes the 1 h token and keeps each replacement refresh token, encrypted)',
    schema: {
      type: 'object',
      required: ['config'],
      additionalProperties: false,
      properties: { config: { oneOf: INTEGRATION_TYPES.map((t) => ({ title: t, ...CREDENTIAL_SCHEMAS[t] })) } },
    },
  })
  @ApiResponse({ status: 200, description: 'stored (replacing any earlier config; event credentials.updated); never echoes a secret', schema: CREDENTIAL_VIEW_SCHEMA })
  @EvaluatesIfMatch()
  @ApiHeader({
    name: 'If-Match',
    required: false,
    description: '* : only replace — 412 PRECONDITION_FAILED, nothing written, when no credentials are stored for this integration. Credentials have no ETag: a list of tags never matches (412). Malformed: 400',
  })
  @ApiHeader({
    name: 'If-None-Match',
    required: false,
    description: '* : only create — 412 PRECONDITION_FAILED, nothing written, when credentials are stored for this integration. A list of tags always holds (there is none to match). Malformed: 400',
  })
  @ApiProblemResponse(412, 'PRECONDITION_FAILED: If-Match: * and none stored, If-None-Match: * and some stored, or If-Match naming tags; nothing was written')
  async put(
    @CurrentPrincipal() p: Principal,
    @Param('orgId') orgId: string,
    @Param('type') type: string,
    @Body() body: Record<string, unknown>,
    @Headers('if-match') ifMatch: string | undefined,
    @Headers('if-none-match') ifNoneMatch: string | undefined,
  ) {
    await this.scope.assertAccess(p, orgId);
    const integration = CredentialsService.assertType(type);
    return this.credentials.put(p, orgId, integration, body, credentialPrecondition(parsePreconditions(ifMatch, ifNoneMatch)));
  }

  @Delete(':type/credentials')
  @HttpCode(204)
  @Roles('admin')
  @ApiRoles(['admin'], CREDENTIALS_ADMIN)
  @ApiIntegrationTypeParam()
  @ApiResponse({ status: 204, description: 'deleted, no body; a credentials.deleted event records the fingerprint of the config removed' })
  @ApiProblemResponse(404, 'NOT_FOUND: no credentials stored for this integration, a type not listed, or no such org (or another org’s)')
  async remove(@CurrentPrincipal() p: Principal, @Param('orgId') orgId: string, @Param('type') type: string): Promise<void> {
    await this.scope.assertAccess(p, orgId);
    await this.credentials.remove(p, orgId, CredentialsService.assertType(type));
  }
}
