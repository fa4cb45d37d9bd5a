import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { ApiRoles } from '../common/http/api-roles.js';
import { ApiProblemResponse, PROBLEM_CONTENT } from '../common/http/openapi.js';
import { CurrentPrincipal, KeyKind, Roles } from './auth.decorators.js';
import { API_KEYS_DEFAULT_PAGE, API_KEYS_MAX_PAGE, CreateApiKeyDto, ListApiKeysQuery } from './api-keys.dto.js';
import { ApiKeysService, platformKeyRefusal, type ApiKeyPage } from './api-keys.service.js';
import type { Principal } from './principal.js';

/** An API key as ApiKeysService answers it (its `view`); the key text itself is never part of it. */
const API_KEY_SCHEMA = {
  type: 'object',
  required: ['id', 'orgId', 'role', 'name', 'keyPrefix', 'createdAt', 'revokedAt', 'lastUsedAt'],
  properties: {
    id: { type: 'string', format: 'uuid' },
    orgId: { type: 'string', format: 'uuid', nullable: true },
    role: { type: 'string', enum: ['agent', 'expert', 'ops', 'admin'] },
    name: { type: 'string' },
    keyPrefix: { type: 'string', example: 'tgw_ab12' },
    createdAt: { type: 'string', format: 'date-time' },
    revokedAt: { type: 'string', format: 'date-time', nullable: true },
    lastUsedAt: { type: 'string', format: 'date-time', nullable: true },
  },
};

@ApiTags('api-keys')
@ApiBearerAuth()
@Controller('v1/api-keys')
export class ApiKeysController {
  constructor(private readonly keys: ApiKeysService) {}

  @Post()
  @Roles('admin')
  @KeyKind(platformKeyRefusal)
  @ApiRoles(['admin'], {
    note: 'An org admin key creates keys for its own org only; a platform key (orgId null, ops or admin) needs a platform admin key.',
    forbiddenAlso: 'an org admin asking for a platform key (orgId null)',
  })
  @ApiResponse({
    status: 201,
    description: 'the key; `key` is shown this once and never again (only its hash is stored)',
    schema: {
      type: 'object',
      required: [...API_KEY_SCHEMA.required, 'key'],
      properties: { ...API_KEY_SCHEMA.properties, key: { type: 'string', example: 'tgw_…' } },
    },
  })
  @ApiProblemResponse(404, 'NOT_FOUND: orgId names an unknown org, or (org admins) another org')
  create(@CurrentPrincipal() p: Principal, @Body() dto: CreateApiKeyDto) {
    return this.keys.create(p, dto);
  }

  @Get()
  @Roles('admin')
  @ApiRoles(['admin'], {
    note: 'An org admin key lists its own org’s keys; a platform admin key any org’s, the platform keys, or every key.',
    summary: 'List API keys, newest first, keyset-paginated',
    description:
      `Ordered by createdAt then id, newest first. \`limit\` 1–${API_KEYS_MAX_PAGE} (default ${API_KEYS_DEFAULT_PAGE}); ` +
      'while `nextCursor` is not null, pass it as `cursor` with the same `orgId` for the next page. A cursor is signed and bound to ' +
      'this listing and its scope (org, "platform", or every key): another scope or listing answers 400 VALIDATION_FAILED. ' +
      'Keys created after the first page was read appear on a new first page, not on later pages.',
  })
  @ApiResponse({
    status: 200,
    description: 'one page of keys (the key text is never listed)',
    schema: {
      type: 'object',
      required: ['items', 'nextCursor'],
      properties: {
        items: { type: 'array', items: API_KEY_SCHEMA },
        nextCursor: { type: 'string', nullable: true, description: 'null on the last page' },
      },
    },
  })
  @ApiResponse({
    status: 400,
    description: `VALIDATION_FAILED: limit outside 1–${API_KEYS_MAX_PAGE} or not an integer, or a cursor that is invalid or from another listing or scope`,
    content: PROBLEM_CONTENT,
  })
  @ApiResponse({
    status: 404,
    description: 'NOT_FOUND: orgId names an unknown org, or (org admins) another org',
    content: PROBLEM_CONTENT,
  })
  list(@CurrentPrincipal() p: Principal, @Query() q: ListApiKeysQuery): Promise<ApiKeyPage> {
    return this.keys.list(p, q);
  }

  @Delete(':id')
  @HttpCode(204)
  @Roles('admin')
  @ApiRoles(['admin'], {
    note: 'An org admin key revokes its own org’s keys (another org’s answers 404); a platform admin key any key.',
    summary: 'Revoke an API key',
    description: 'Revoking a revoked key answers 204 again. Takes effect at once on every replica for writes (tool calls, decisions, admin changes); reads may pass for up to 5 s on a replica that has the key cached.',
  })
  @ApiResponse({ status: 204, description: 'revoked' })
  @ApiResponse({ status: 409, description: 'CONFLICT: the last platform admin key (nobody could create orgs or keys again); create another first', content: PROBLEM_CONTENT })
  async revoke(@CurrentPrincipal() p: Principal, @Param('id') id: string): Promise<void> {
    await this.keys.revoke(p, id);
  }
}
