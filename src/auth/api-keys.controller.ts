import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from './auth.decorators.js';
import { CreateApiKeyDto, ListApiKeysQuery } from './api-keys.dto.js';
import { ApiKeysService } from './api-keys.service.js';
import type { Principal } from './principal.js';

@ApiTags('api-keys')
@ApiBearerAuth()
@Controller('v1/api-keys')
export class ApiKeysController {
  constructor(private readonly keys: ApiKeysService) {}

  @Post()
  @Roles('admin')
  @ApiResponse({
    status: 201,
    description: 'the key; `key` is shown this once and never again (only its hash is stored)',
    schema: {
      type: 'object',
      required: ['id', 'key', 'orgId', 'role', 'name', 'createdAt'],
      properties: {
        id: { type: 'string', format: 'uuid' },
        key: { type: 'string', example: 'tgw_…' },
        orgId: { type: 'string', format: 'uuid', nullable: true },
        role: { type: 'string', enum: ['agent', 'expert', 'ops', 'admin'] },
        name: { type: 'string' },
        createdAt: { type: 'string', format: 'date-time' },
      },
    },
  })
  create(@CurrentPrincipal() p: Principal, @Body() dto: CreateApiKeyDto) {
    return this.keys.create(p, dto);
  }

  @Get()
  @Roles('admin')
  async list(@CurrentPrincipal() p: Principal, @Query() q: ListApiKeysQuery) {
    return { items: await this.keys.list(p, q.orgId) };
  }

  @Delete(':id')
  @HttpCode(204)
  @Roles('admin')
  async revoke(@CurrentPrincipal() p: Principal, @Param('id') id: string): Promise<void> {
    await this.keys.revoke(p, id);
  }
}
