import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { KeyRateLimiter } from '../auth/key-rate-limiter.js';
import type { Principal } from '../auth/principal.js';
import { LedgerVerifierService, parseAnchor, type VerifyResult } from '../ledger/ledger-verifier.service.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { filterHash, LedgerCursorCodec } from './ledger-cursor.js';
import { ledgerEventsSizedPageSql, ledgerEventView, type LedgerEventFilters, type LedgerEventRow, type LedgerEventView } from './ledger-events.sql.js';
import { assertTimeWindow, parseQueryTimestamp } from './ledger-time.js';
import { DEFAULT_PAGE, listingScope, scopeKey } from './ops-scope.js';
import type { LedgerEventsQuery } from './ops.dto.js';
import { ToolCallsQueryService } from './tool-calls-query.service.js';
import { LIST_PAGE_BYTES } from './tool-calls.sql.js';
import { rowBytes } from '../db/sized-page.js';

/** Ops' read side of the event ledger: filtered keyset pages and chain verification. */
@Injectable()
export class LedgerQueryService {
  constructor(
    private readonly ds: DataSource,
    private readonly scope: OrgScopeService,
    private readonly cursors: LedgerCursorCodec,
    private readonly verifier: LedgerVerifierService,
    private readonly calls: ToolCallsQueryService,
    private readonly limiter: KeyRateLimiter,
  ) {}

  async events(p: Principal, q: LedgerEventsQuery): Promise<{ items: LedgerEventView[]; nextCursor: string | null }> {
    const filters: LedgerEventFilters = {
      runId: q.runId,
      type: q.type,
      since: parseQueryTimestamp('since', q.since),
      until: parseQueryTimestamp('until', q.until),
    };
    assertTimeWindow('since', filters.since, 'until', filters.until);
    const orgId = await listingScope(this.scope, p, q.orgId, { platformChain: true });
    const hash = filterHash({ ...filters });
    const after = q.cursor === undefined ? undefined : this.cursors.decode(q.cursor, 'ledger-events', scopeKey(orgId), hash);
    const limit = q.limit ?? DEFAULT_PAGE;
    // An approval past its expiry is written down first (its tool_call.blocked event, reason approval_expired), as the
    // tool-call listings do: the events would otherwise go on showing the call waiting until the sweep's next pass.
    if (after === undefined && (filters.type === undefined || filters.type === 'tool_call.blocked')) await this.calls.expireOverdueApprovalsOf(orgId);
    // A page holds at most LIST_PAGE_BYTES of metadata and actor, as a tool-call page does of input and output (an org
    // admin's events carry up to a 64 KiB body each), and is charged by size as it is: a token of the key's
    // RATE_LIMIT_RPS more per 64 KiB beyond the first, once built and before it is sent. Before, ten pages of 200
    // large events at once were 229 MB answered at a token each.
    const { sql, params } = ledgerEventsSizedPageSql(orgId, filters, after, limit + 1, LIST_PAGE_BYTES);
    // Read and charged in the key's turn (KeyRateLimiter.listingTurn): a key's pages one at a time.
    const rows = await this.limiter.listingTurn(
      p.keyId, 'page', async () => (await this.ds.query(sql, params)) as (LedgerEventRow & { page_rows: string; row_bytes: number })[], (read) => rowBytes(read.slice(0, limit)),
    );
    const cut = rows.length > 0 && rows.length < Number(rows[0].page_rows);
    const items = rows.slice(0, limit);
    const last = items.at(-1);
    const nextCursor =
      (rows.length > limit || cut) && last ? this.cursors.encode('ledger-events', scopeKey(orgId), hash, { createdIso: last.created_iso, key: last.seq }) : null;
    return { items: items.map(ledgerEventView), nextCursor };
  }

  /**
   * Recomputes one org's hash chain: an org key its own org, a platform key the org (or the platform chain) it names (required).
   * Requests for the same org share one run in this process, and only a few orgs' run at once (LedgerVerifierService).
   */
  async verify(p: Principal, orgId: string | undefined, anchor?: string): Promise<VerifyResult> {
    return this.verifier.verify(await this.scope.resolveOrg(p, orgId, { platformChain: true }), anchor === undefined ? undefined : (parseAnchor(anchor) ?? undefined));
  }
}
