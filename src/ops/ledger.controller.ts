import { Controller, Get, Query } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse, ApiTags } from '@nestjs/swagger';
import { CurrentPrincipal, Roles } from '../auth/auth.decorators.js';
import { ApiRoles, LEDGER_READERS } from '../common/http/api-roles.js';
import type { Principal } from '../auth/principal.js';
import { LedgerQueryService } from './ledger-query.service.js';
import { LedgerEventsQuery, LedgerVerifyQuery } from './ops.dto.js';
import { LEDGER_EVENT_PAGE_SCHEMA, LEDGER_VERIFY_SCHEMA } from './ops.schemas.js';

@ApiTags('ledger')
@ApiBearerAuth()
@Controller('v1/ledger')
export class LedgerController {
  constructor(private readonly ledger: LedgerQueryService) {}

  @Get('events')
  @Roles('ops', 'admin')
  @ApiRoles(['ops', 'admin'], {
    note: LEDGER_READERS,
    summary: 'List ledger events, newest first',
    description:
      'Platform-level events (platform keys created and revoked, bootstrap admin keys retired) belong to no org: they are ' +
      'chained under the nil UUID 00000000-0000-0000-0000-000000000000, which a platform key may name as orgId; an org key gets 404.',
  })
  @ApiResponse({ status: 200, description: 'one page of events, newest first', schema: LEDGER_EVENT_PAGE_SCHEMA })
  events(@CurrentPrincipal() p: Principal, @Query() q: LedgerEventsQuery) {
    return this.ledger.events(p, q);
  }

  @Get('verify')
  @Roles('ops', 'admin')
  @ApiRoles(['ops', 'admin'], {
    note: LEDGER_READERS,
    summary: "Recompute an org's hash chain",
    description:
      'Seals what is committed, then checks every sealed event: {ok, checked, headHash}, or {ok: false, brokenAt: {chainSeq, eventId, reason}} ' +
      'at the first changed, missing, reordered, off-chain or unhashable event; then that every tool call row agrees with its events ' +
      '(a settled call\'s last settling event has its status, error code and digest; a row deleted or an outcome edited is a break, ' +
      'chainSeq 0 when the call has no event); that every run row agrees with its run.created and end events (specialist, creating key, ' +
      'manifest by manifestDigest, creation time, status, the end\'s actor, time and reason by reasonDigest); then credentials, flags, permissions, policy and keys ' +
      'against their events (README "Verifying the chain"). Concurrent verifies of one org share one run. A platform key verifies the platform chain ' +
      '(platform keys created and revoked, bootstrap admin keys retired) by naming orgId=00000000-0000-0000-0000-000000000000; an org key gets 404. ' +
      'With anchor=<chainSeq>:<hash> (an earlier answer\'s checked and headHash, kept outside the database), an intact chain must also hold ' +
      'that hash at that position: a chain that ends before it (events cut from its end) or holds another hash there (rewritten and sealed ' +
      'again by someone past the append-only trigger) is broken at the anchor.',
  })
  @ApiResponse({
    status: 200,
    description: 'the chain is intact ({ok: true, checked, headHash}) or broken ({ok: false, checked, brokenAt}); both are 200',
    schema: LEDGER_VERIFY_SCHEMA,
  })
  verify(@CurrentPrincipal() p: Principal, @Query() q: LedgerVerifyQuery) {
    return this.ledger.verify(p, q.orgId, q.anchor);
  }
}
