import type pg from 'pg';
import { seedingClient, stopSweep } from './backlog-seed.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { refunds, waitingRefund } from './support.js';
import { startHarness, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { settleApprovalsSql as previousReleaseSettle } from './fixtures/previous-release-settle.sql.js';

/**
 * A run's end no longer locks its pending approvals first (a large backlog made that one statement outlast the
 * statement timeout): it locks the run, and the settle statement decides nothing for an ended run. A replica of the
 * release before, still serving during a rolling upgrade, decides with its settle statement (frozen in fixtures/),
 * which does not read the run: holding the approval as the run ends, it approves it after the end. The claim reads the
 * run, so the approved call ends blocked RUN_NOT_ACTIVE, nothing sent (README: an approved call of an ended run never
 * runs). (That replica's own runner, of the release before, does not read the run: the upgrade note says so.)
 */
describe('a decision by a replica of the release before, racing a run end during a rolling upgrade', () => {
  let h: Harness;
  let seeder: pg.Client;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    await stopSweep(h);
    ({ client: seeder } = await seedingClient());
  }, 60_000);
  afterAll(async () => {
    await seeder?.end();
    await h?.close();
  });

  it('the approval it writes after the end runs nothing: the claim finds the run ended and blocks the call RUN_NOT_ACTIVE', async () => {
    const { org, toolCallId: callId, approval } = await waitingRefund(h, '4.00');
    const before = refunds(h);
    const [{ id: expertKeyId }] = (await h.t.ds.query(`SELECT id FROM api_keys WHERE org_id = $1 AND role = 'expert'`, [org.orgId])) as { id: string }[];

    // The previous release's ApprovalsService.settle: the approval's row lock first, then the settle statement.
    await seeder.query('BEGIN');
    await seeder.query('SELECT 1 FROM approval_requests WHERE id = $1 FOR UPDATE', [approval.id]);
    const end = await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.adminKey)).send({ reason: 'stop' });
    expect([end.status, end.body.status]).toEqual([200, 'cancelled']);
    const settled = await seeder.query(previousReleaseSettle('by-id'), [approval.id, 'approved', new Date(), expertKeyId, 'expert', null]);
    await seeder.query('COMMIT');

    await h.t.app.get(ApprovedCallRunner).sweep();
    const call = (await h.t.ds.query('SELECT status, error_code FROM tool_calls WHERE id = $1', [callId])) as unknown[];
    // The release before approved it after the end (its statement does not read the run); nothing ran.
    expect({ approvedAfterEnd: settled.rows.length, call, refundsSent: refunds(h) - before }).toEqual({
      approvedAfterEnd: 1, call: [{ status: 'blocked', error_code: 'RUN_NOT_ACTIVE' }], refundsSent: 0,
    });
    const [event] = (await h.t.ds.query(`SELECT metadata FROM runtime_ledger_events WHERE tool_call_id = $1 AND type = 'tool_call.blocked'`, [callId])) as {
      metadata: Record<string, unknown>;
    }[];
    expect(event.metadata).toMatchObject({ errorCode: 'RUN_NOT_ACTIVE', reason: 'run_ended', afterApproval: true });
  }, 120_000);
});
