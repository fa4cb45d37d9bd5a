import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
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
