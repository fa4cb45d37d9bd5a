import { Controller, Get, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import type { Principal } from '../auth/principal.js';
import { LedgerQueryService } from './ledger-query.service.js';
import { LedgerEventsQuery, LedgerVerifyQuery } from './ops.dto.js';

@ApiTags('ledger')
@ApiBearerAuth()
@Controller('v1/ledger')
export class LedgerController {
  constructor(private readonly ledger: LedgerQueryService) {}

  @Get('events')
  @Roles('ops', 'admin')
  events(@CurrentPrincipal() p: Principal, @Query() q: LedgerEventsQuery) {
    return this.ledger.events(p, q);
  }

  @Get('verify')
  @Roles('ops', 'admin')
  verify(@CurrentPrincipal() p: Principal, @Query() q: LedgerVerifyQuery) {
    return this.ledger.verify(p, q.orgId);
  }
}
