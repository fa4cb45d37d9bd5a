import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { Principal } from '../auth/principal.js';
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

/** Usage and cost per tool and action, straight from the tool-call ledger. */
@Injectable()
export class UsageService {
  constructor(
    private readonly ds: DataSource,
    private readonly scope: OrgScopeService,
    private readonly calls: ToolCallsQueryService,
  ) {}

  async byTool(p: Principal, orgId: string, q: UsageQuery): Promise<{ byTool: ToolUsage[] }> {
    await this.scope.assertAccess(p, orgId);
    const from = parseQueryTimestamp('from', q.from);
    const to = parseQueryTimestamp('to', q.to);
    assertTimeWindow('from', from, 'to', to);
    // An approval past its expiry is written down first, as the listings do (README: reads show it expired from
    // the moment it passes), so the call counts as blocked here too, not only once the sweep has run.
    await this.calls.expireOverdueApprovalsOf(orgId);
    const rows = (await this.ds.query(
      `SELECT tool_name, action, count(*) AS calls,
              count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
              count(*) FILTER (WHERE status = 'failed') AS failed,
              count(*) FILTER (WHERE status = 'blocked') AS blocked,
              coalesce(sum(cost_cents), 0) AS cost_cents
         FROM tool_calls
        WHERE org_id = $1::uuid AND ($2::timestamptz IS NULL OR created_at >= $2::timestamptz)
          AND ($3::timestamptz IS NULL OR created_at < $3::timestamptz)
        GROUP BY tool_name, action ORDER BY tool_name, action`,
      [orgId, from ?? null, to ?? null],
    )) as { tool_name: string; action: string; calls: string; succeeded: string; failed: string; blocked: string; cost_cents: string }[];
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
