import { Injectable, Logger } from '@nestjs/common';
import type { Principal } from '../auth/principal.js';
import { KeyRateLimiter } from '../auth/key-rate-limiter.js';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { retryOnDeadlock } from '../common/errors/database-errors.js';
import { isUuid } from '../common/ids.js';
import { CREATED_ISO_SQL } from '../ledger/ledger-chain.js';
import { Sql } from '../db/sql.js';
import { redactFreeText } from '../redaction/redaction.service.js';
import { filterHash, LedgerCursorCodec } from '../ops/ledger-cursor.js';
import { LIST_PAGE_BYTES } from '../ops/tool-calls.sql.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { ApprovalExpiries } from './approval-expiries.js';
import { approvalsSizedPageSql, type ApprovalListingRow } from './approvals-listing.sql.js';
import { settleApprovalsSql, type SettledApproval } from './approval-settle.sql.js';
import { APPROVAL_COLUMNS, approvalView, type ApprovalRecord } from './approval.view.js';
import type { DecideApprovalDto, ListApprovalsQuery } from './approvals.dto.js';
import { listingScope } from '../ops/ops-scope.js';
import { ApprovedCallRunner } from './approved-call-runner.service.js';
import { clientQuery, holdActorKey } from '../auth/actor-key-hold.js';
import { APPROVAL_NOT_BOUND, APPROVAL_ROW_AGREES_SQL } from './approval-binding.js';
import { rowBytes } from '../db/sized-page.js';

interface ApprovalRow extends ApprovalRecord {
  created_iso: string;
}

const COLUMNS = `${APPROVAL_COLUMNS}, ${CREATED_ISO_SQL} AS created_iso`;

/**
 * Who may see and decide which kind, within the key's org: experts/admins the expert ones, agents the client ones
 * (API.md §5) — of every run of the org, not only the runs the agent key started: "Client approvals are decided by
 * any `agent` key of the run's org" (API.md §9; the customer's answer may be relayed by another bot of the org). The
 * run and its calls and results stay the starting key's (reachesRun).
 */
const mayDecide = (p: Principal, kind: 'expert' | 'client'): boolean =>
  kind === 'expert' ? p.role === 'expert' || p.role === 'admin' : p.role === 'agent' || p.role === 'admin';
const maySee = (p: Principal, kind: 'expert' | 'client'): boolean => p.role !== 'agent' || kind === 'client';

/**
 * The approval as its decision settled it, from the row read before and what the settle statement wrote
 * (settleApprovalsSql: the decider, the time, the reason; the call approved, or blocked with the rejecting kind's code):
 * the answer when the read after the commit fails.
 */
function decidedAs(a: ApprovalRow, settled: SettledApproval, at: Date, p: Principal, reason: string | null): ApprovalRow {
  const approved = settled.status === 'approved';
  const call = { status: approved ? 'approved' : 'blocked', errorCode: approved ? null : a.kind === 'expert' ? 'EXPERT_REJECTED' : 'CLIENT_REJECTED' };
  return {
    ...a, status: settled.status, decided_by: p.keyId, decided_role: p.role, decided_at: at, decision_reason: reason,
    tool_call: a.tool_call ? { ...a.tool_call, ...call } : null,
  };
}

@Injectable()
export class ApprovalsService {
  private readonly log = new Logger('Approvals');

  constructor(
    private readonly sql: Sql,
    private readonly scope: OrgScopeService,
    private readonly cursors: LedgerCursorCodec,
    private readonly clock: Clock,
    private readonly runner: ApprovedCallRunner,
    private readonly expiries: ApprovalExpiries,
    private readonly limiter: KeyRateLimiter,
  ) {}

  async list(p: Principal, q: ListApprovalsQuery) {
    // An org key naming another org → 404, as for every ledger listing.
    const orgId = await listingScope(this.scope, p, q.orgId);
    if (q.runId !== undefined && !isUuid(q.runId)) throw new AppError('VALIDATION_FAILED', 'runId: must be a UUID');
    const kind = p.role === 'agent' ? 'client' : q.kind;
    const limit = q.limit ?? 50;
    const filters = filterHash({ status: q.status, kind, runId: q.runId });
    const scopeKey = orgId ?? '*';
    // The cursor is judged first, as for every other query: a bad one is 400 even when the page is empty anyway.
    const after = q.cursor ? this.cursors.decode(q.cursor, 'approvals', scopeKey, filters) : undefined;
    // An agent sees client approvals only: asking for the expert ones is an empty page, not an error.
    if (p.role === 'agent' && q.kind === 'expert') return { items: [], nextCursor: null };
    const now = this.clock.now();
    const { sql, params } = approvalsSizedPageSql({ orgId, status: q.status, kind, runId: q.runId }, after, limit + 1, now, LIST_PAGE_BYTES);
    // Read in the key's turn and charged by size as a ledger list page is (KeyRateLimiter.listingTurn, chargeListing): a
    // token more per 64 KiB of redacted input.
    const rows = await this.limiter.listingTurn(p.keyId, 'page', () => this.sql.query<ApprovalListingRow>(sql, params), (read) => rowBytes(read.slice(0, limit)));
    const cut = rows.length > 0 && rows.length < Number(rows[0].page_rows);
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return {
      items: items.map((a) => approvalView(a, now.getTime())),
      nextCursor: (rows.length > limit || cut) && last ? this.cursors.encode('approvals', scopeKey, filters, { createdIso: last.created_iso, key: last.id }) : null,
    };
  }

  async get(p: Principal, id: string) {
    return approvalView(await this.load(p, id), this.clock.nowMs());
  }

  async decide(p: Principal, id: string, dto: DecideApprovalDto) {
    // One that the key may not even see (an expert approval, to an agent) is 404 like a missing one: a
    // wrong-role caller learns nothing about existence (API.md §9). One it may see but not decide is 403.
    const a = await this.load(p, id);
    if (!mayDecide(p, a.kind)) throw new AppError('FORBIDDEN', `${a.kind} approvals cannot be decided with an ${p.role} key (${a.kind === 'expert' ? 'an expert or admin key decides them' : 'an agent or admin key of the org decides them'})`);
    if (a.status !== 'pending') throw new AppError('APPROVAL_ALREADY_DECIDED', `this approval is already ${a.status}`);
    if (dto.actionDigest !== a.action_digest) {
      // Past its expiry, the answer is the one a right digest gets: nothing can be decided any more.
      if (a.expires_at.getTime() <= this.clock.nowMs()) throw new AppError('APPROVAL_ALREADY_DECIDED', 'this approval expired before it was decided');
      throw new AppError('ACTION_DIGEST_MISMATCH', 'actionDigest does not match the action awaiting approval');
    }
    if (dto.decision === 'approve') await this.assertBound(a, p);
    const reason = dto.reason === undefined ? null : redactFreeText(dto.reason);
    const { settled, at } = await this.settle(p, id, dto.decision === 'approve' ? 'approved' : 'rejected', [p.keyId, p.role, reason, p.correlationId ?? null]);
    if (!settled) throw new AppError('APPROVAL_ALREADY_DECIDED', 'this approval was decided by someone else first');
    this.expiries.recorded([settled]);
    if (settled.status === 'expired') throw new AppError('APPROVAL_ALREADY_DECIDED', 'this approval expired before it was decided');
    // The call runs outside the approver's request; the agent picks the result up by long-poll or re-post.
    if (settled.status === 'approved') void this.runner.runSoon(settled.tool_call_id); // it logs its own errors
    // The decision is committed: whatever the read of it now meets (a statement timeout behind another session's lock,
    // a full pool, a lost connection), the answer is that it was decided. A 503 "retry later" here asked for a retry
    // that can only be 409, and told an agent relaying a customer's yes that nothing happened: the model may then ask
    // for the refund again under a new tool_use id.
    try {
      return approvalView(await this.load(p, id, false), this.clock.nowMs());
    } catch (err) {
      this.log.warn({ approvalId: id, toolCallId: settled.tool_call_id, err: { code: (err as { code?: unknown }).code } }, 'decision recorded; answered as settled, its read failed');
      return approvalView(decidedAs(a, settled, at, p, reason), this.clock.nowMs());
    }
  }

  /**
   * The approver is not the one who asked (expert approvals), and what the approver was shown is the call that would run (approval-binding.ts): the approval row names the call
   * row's tool, action, redacted input and digest. Else 409 ACTION_DIGEST_MISMATCH, nothing settled: the digest sent
   * back is not that of the action awaiting approval. The runner checks it again before anything is sent.
   */
  private async assertBound(a: ApprovalRow, p: Principal): Promise<void> {
    const [b] = await this.sql.query<{ agrees: boolean; own: boolean }>(
      `SELECT ${APPROVAL_ROW_AGREES_SQL} AS agrees,
              (t.actor_key_id = $2 OR EXISTS (SELECT 1 FROM agent_runs r WHERE r.id = t.run_id AND r.created_by = $2)) AS own
         FROM approval_requests a JOIN tool_calls t ON t.id = a.tool_call_id AND t.org_id = a.org_id
        WHERE a.id = $1`,
      [a.id, p.keyId],
    );
    // Four eyes: an expert approval is the second person a risky call needs, so the key that asked for the call (or
    // started its run) does not give it — an admin key can post calls and decide expert approvals both. It may reject.
    if (b?.own === true && a.kind === 'expert') {
      throw new AppError('FORBIDDEN', 'an expert approval cannot be given with the key that asked for the call or started its run: another expert or admin key must decide it');
    }
    if (!b?.agrees) throw new AppError('ACTION_DIGEST_MISMATCH', APPROVAL_NOT_BOUND);
  }

  /**
   * The settle statement, after the approval's row lock, on the clock read once the lock is held: a
   * decision that waited (for the row, behind another decision or a run ending) is judged at the time
   * it is written down, so an approval every read has shown expired is never approved afterwards.
   * Again when it lost a deadlock (40P01) to a run ending at the same moment (RunsService.end locks
   * the run's pending approvals, then the run; it retries on its side too): the loser was rolled back
   * whole, and the statement only settles a still-pending approval, so running it again is safe: it
   * settles it, or finds it settled by the end (→ 409 above).
   */
  private async settle(
    p: Principal, id: string, decision: 'approved' | 'rejected', decider: unknown[],
  ): Promise<{ settled: SettledApproval | undefined; at: Date }> {
    return retryOnDeadlock(() =>
      this.sql.transaction(async (client) => {
        await client.query('SELECT 1 FROM approval_requests WHERE id = $1 FOR UPDATE', [id]);
        const at = this.clock.now();
        const { rows } = await client.query<SettledApproval>(settleApprovalsSql('by-id'), [id, decision, at, ...decider]);
        // A decision by a key revoked meanwhile (while this waited for the row, say) is none: 401, nothing settled.
        await holdActorKey(clientQuery(client), p);
        return { settled: rows[0], at };
      }),
    );
  }

  private async load(p: Principal, id: string, applyVisibility = true): Promise<ApprovalRow> {
    if (!isUuid(id)) throw new AppError('NOT_FOUND', 'approval not found');
    const [a] = await this.sql.query<ApprovalRow>(`SELECT ${COLUMNS} FROM approval_requests WHERE id = $1`, [id]);
    if (!a || (p.orgId !== null && a.org_id !== p.orgId) || (applyVisibility && !maySee(p, a.kind))) {
      throw new AppError('NOT_FOUND', 'approval not found');
    }
    return a;
  }
}
