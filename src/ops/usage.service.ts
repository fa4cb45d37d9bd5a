import { Inject, Injectable } from '@nestjs/common';
import type { Principal } from '../auth/principal.js';
import { AppError } from '../common/errors/app-error.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { Sql } from '../db/sql.js';
import { statementTimeoutFor } from '../db/session-settings.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { assertTimeWindow, parseQueryTimestamp } from './ledger-time.js';
import { ToolCallsQueryService } from './tool-calls-query.service.js';
import type { UsageQuery } from './ops.dto.js';

export interface ToolUsage {
  toolName: string;
  action: string;
  calls: number;
  succeeded: number;
  failed: number;
  blocked: number;
  costCents: number;
}

const USAGE_SQL = `SELECT tool_name, action, count(*) AS calls,
         count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
         count(*) FILTER (WHERE status = 'failed') AS failed,
         count(*) FILTER (WHERE status = 'blocked') AS blocked,
         coalesce(sum(cost_cents), 0) AS cost_cents
    FROM tool_calls
   WHERE org_id = $1::uuid AND ($2::timestamptz IS NULL OR created_at >= $2::timestamptz)
     AND ($3::timestamptz IS NULL OR created_at < $3::timestamptz)
   GROUP BY tool_name, action ORDER BY tool_name, action`;

type UsageRow = { tool_name: string; action: string; calls: string; succeeded: string; failed: string; blocked: string; cost_cents: string };

/** query_canceled, by the server's statement_timeout (not an operator's cancel, which says "user request"). */
const isStatementTimeout = (err: unknown): boolean =>
  (err as { code?: unknown }).code === '57014' && /statement timeout/.test(String((err as { message?: unknown }).message));

/**
 * Usage and cost per tool and action, straight from the tool-call ledger: one aggregate over the org's calls in the
 * window (all time without from/to). Its lock waits are bounded at half the statement timeout (lock_timeout: a
 * migration or an operator holding tool_calls is 503 DATABASE_UNAVAILABLE, to retry), so a statement timeout is the
 * adding up itself: an org whose window holds more calls than the database adds up in that time (about 60 million at
 * the 15 s default). That answer was a 503 "retry later" on every try, forever, with /readyz green; it is now 400
 * VALIDATION_FAILED naming from/to: ask for narrower windows and add their answers.
 */
@Injectable()
export class UsageService {
  private readonly statementTimeoutMs: number;
  private readonly lockTimeoutMs: number;

  constructor(
    private readonly sql: Sql,
    private readonly scope: OrgScopeService,
    private readonly calls: ToolCallsQueryService,
    @Inject(APP_CONFIG) config: Pick<AppConfig, 'DB_QUERY_TIMEOUT_MS'>,
  ) {
    this.statementTimeoutMs = statementTimeoutFor(config.DB_QUERY_TIMEOUT_MS);
    this.lockTimeoutMs = Math.max(1, Math.floor(this.statementTimeoutMs / 2));
  }

  async byTool(p: Principal, orgId: string, q: UsageQuery): Promise<{ byTool: ToolUsage[] }> {
    await this.scope.assertAccess(p, orgId);
    const from = parseQueryTimestamp('from', q.from);
    const to = parseQueryTimestamp('to', q.to);
    assertTimeWindow('from', from, 'to', to);
    // An approval past its expiry is written down first, as the listings do (README: reads show it expired from
    // the moment it passes), so the call counts as blocked here too, not only once the sweep has run.
    await this.calls.expireOverdueApprovalsOf(orgId);
    const rows = await this.sql.transaction(async (client) => {
      await client.query(`SET LOCAL lock_timeout = '${this.lockTimeoutMs}ms'`);
      try {
        return (await client.query<UsageRow>(USAGE_SQL, [orgId, from ?? null, to ?? null])).rows;
      } catch (err) {
        if (!isStatementTimeout(err)) throw err;
        throw new AppError(
          'VALIDATION_FAILED',
          `from/to: this window holds more of the org's calls than the database adds up within its statement timeout (${this.statementTimeoutMs} ms); ` +
            'ask for narrower windows (from, to) and add their answers',
        );
      }
    });
    return {
      byTool: rows.map((r) => ({
        toolName: r.tool_name,
        action: r.action,
        calls: Number(r.calls),
        succeeded: Number(r.succeeded),
        failed: Number(r.failed),
        blocked: Number(r.blocked),
        costCents: Number(r.cost_cents),
      })),
    };
  }
}
