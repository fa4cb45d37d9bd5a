import { Injectable, Logger } from '@nestjs/common';
import { MetricsService } from '../metrics/metrics.service.js';
import { settledCalls } from '../tool-calls/stored-call.js';
import type { SettledApproval } from './approval-settle.sql.js';

/**
 * Says each expiry the settle statement wrote: an approval queue nobody works leaves no other trace outside the
 * ledger (approvals_pending falls as if they had been decided, tool_calls_total does not move). Given only the rows
 * a committed statement returned — it settles an approval only while still pending — so an expiry is said and
 * counted once, whichever replica or pass wrote it. Ids, tool and action only: never the call's input.
 *
 * Every path that settles approvals (a decision, the sweep, a read) hands its rows here, so it is also where the calls
 * they blocked (rejected, expired) wake the long-polls waiting on them in this process (settledCalls), at once rather
 * than at the next shared look-up.
 */
@Injectable()
export class ApprovalExpiries {
  private readonly log = new Logger('Approvals');

  constructor(private readonly metrics: MetricsService) {}

  /** The rows a committed settle statement returned. */
  recorded(settled: readonly SettledApproval[]): void {
    for (const a of settled) {
      if (a.status === 'expired') {
        this.metrics.approvalsExpired.inc({ kind: a.kind });
        this.log.log(
          { toolCallId: a.tool_call_id, approvalId: a.id, orgId: a.org_id, tool: a.tool_name, action: a.action, kind: a.kind },
          'approval expired undecided: the call is blocked APPROVAL_EXPIRED',
        );
      }
      if (a.status !== 'approved') settledCalls.emit('settled', a.tool_call_id);
    }
  }
}
