import { Controller, Get } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Roles } from '../auth/auth.decorators.js';
import { ToolCatalogService } from './tool-catalog.service.js';

@ApiTags('tools')
@ApiBearerAuth()
@Controller('v1/tools')
export class CatalogController {
  constructor(private readonly catalog: ToolCatalogService) {}

  @Get()
  @Roles('agent', 'ops', 'expert', 'admin')
  list() {
    return { items: this.catalog.list() };
  }
}
