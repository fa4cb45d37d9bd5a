import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settleApprovalsSql } from '../../src/approvals/approval-settle.sql.js';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { Clock } from '../../src/common/clock.js';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { emulatorEnv, setupOrg } from '../support/scenario.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { bearer, createKey, startTestApp, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { approvalFor, refundUse, refunds } from './support.js';

describe('approvals across a restart', () => {
  let emu: VendorEmulator;
  let scratch: ScratchDatabase | undefined;
  // In a database of its own: both tests leave calls approved in the database for seconds (for "a live replica's
  // sweep"), and on the shared database any other gateway on it could take them meanwhile (as one once took
  // drain-claim.spec's), failing them against its own vendors.
  beforeAll(async () => {
    scratch = await createScratchDatabase('tg_restart');
    emu = createFullEmulator();
    await emu.start();
  });
  afterAll(async () => {
    await emu?.stop();
    await scratch?.drop(); // leak-scanned first: the run-wide scan never sees it
  });
  const start = () => startTestApp({ ...emulatorEnv(emu.url), APPROVAL_TTL_SECONDS: '600', DATABASE_URL: scratch!.url });

  it('pending approvals still expire and approved-but-not-started calls run exactly once', async () => {
    const first: TestApp = await start();
    const org = await setupOrg(first, { tools: ['shopify_refund.create'] });
    const expert = await createKey(first, org.orgId, 'expert');
    const h = { t: first, emu, close: async () => undefined };
    const pendingCall = await first.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('1.00', '450789469'));
    const approvedCall = await first.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('2.00', '450789469'));
    const pending = await approvalFor(h, expert.key, pendingCall.body.toolCallId);
    const approved = await approvalFor(h, expert.key, approvedCall.body.toolCallId);
    // Approved, then the process died before starting it: settle in the database without running.
    await first.ds.query(settleApprovalsSql('by-id'), [approved.id, 'approved', new Date(), expert.id, 'expert', null, null]);
    await first.close();
    const before = refunds(h, '450789469');

    const second = await start();
    try {
      // The start-up sweep ran the approved call.
      const result = await second.http.get(`/v1/tool-calls/${approvedCall.body.toolCallId}/result?waitMs=10000`).set(bearer(org.agentKey));
      expect(result.body.status).toBe('succeeded');
      await second.app.get(ApprovedCallRunner).sweep();
      await second.app.get(ApprovedCallRunner).sweep();
      expect(refunds(h, '450789469') - before).toBe(1);

      const stillPending = await second.http.get(`/v1/approvals/${pending.id}`).set(bearer(expert.key));
      expect(stillPending.body.status).toBe('pending');
      second.app.get(Clock).advance(601_000);
      await second.app.get(ApprovedCallRunner).sweep();
      const expired = await second.http.get(`/v1/tool-calls/${pendingCall.body.toolCallId}/result`).set(bearer(org.agentKey));
      expect(expired.body).toMatchObject({ status: 'blocked', errorCode: 'APPROVAL_EXPIRED' });
      expect(refunds(h, '450789469') - before).toBe(1);
    } finally {
      second.app.get(Clock).advance(-601_000);
      await second.close();
    }
  });

  it('a gateway shutting down starts no new approved call: the periodic pass stops before the HTTP drain', async () => {
    const t: TestApp = await start();
    try {
      const org = await setupOrg(t, { tools: ['shopify_refund.create'] });
      const expert = await createKey(t, org.orgId, 'expert');
      const h = { t, emu, close: async () => undefined };
      // Positive control: while the gateway is not stopping, its periodic pass (every 5 s) does run a call another
      // replica approved in the database. Without this, the negative check below would pass if the pass never ran.
      const control = await t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('4.00', '450789469'));
      const controlApproval = await approvalFor(h, expert.key, control.body.toolCallId);
      const beforeControl = refunds(h, '450789469');
      await t.ds.query(settleApprovalsSql('by-id'), [controlApproval.id, 'approved', new Date(), expert.id, 'expert', null, null]);
      // Within a pass or two (every 5 s); a loaded machine may run one late, so the bound is generous.
      await waitFor(() => refunds(h, '450789469') > beforeControl, 'the periodic pass to run the call approved in the database', 15_000, 50);
      await waitFor(
        async () => ((await t.ds.query('SELECT status FROM tool_calls WHERE id = $1', [control.body.toolCallId])) as { status: string }[])[0]?.status === 'succeeded',
        'the control call to be recorded as succeeded',
        5_000,
        50,
      );
      expect(refunds(h, '450789469') - beforeControl).toBe(1);

      const call = await t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('3.00', '450789469'));
      const approval = await approvalFor(h, expert.key, call.body.toolCallId);
      const before = refunds(h, '450789469');
      await t.app.get(ApprovedCallRunner).beforeApplicationShutdown(); // what app.close() does first
      // Approved meanwhile by another replica (in the database, without running it here).
      await t.ds.query(settleApprovalsSql('by-id'), [approval.id, 'approved', new Date(), expert.id, 'expert', null, null]);
      await new Promise((r) => setTimeout(r, 5_500)); // past the 5 s period of the pass
      const [row] = (await t.ds.query('SELECT status FROM tool_calls WHERE id = $1', [call.body.toolCallId])) as { status: string }[];
      expect(row.status).toBe('approved'); // left for a live replica's sweep
      expect(refunds(h, '450789469')).toBe(before);
      // A live replica's sweep runs it, once (this one, stopping, would not start it even when asked).
      await t.app.get(ApprovedCallRunner).sweep();
      expect(refunds(h, '450789469')).toBe(before);
      const live: TestApp = await start();
      try {
        // Its start-up pass starts it (without holding start-up for it); its own sweep does not start it again.
        const result = await live.http.get(`/v1/tool-calls/${call.body.toolCallId}/result?waitMs=10000`).set(bearer(org.agentKey));
        expect(result.body.status).toBe('succeeded');
        await live.app.get(ApprovedCallRunner).sweep();
        expect(refunds(h, '450789469') - before).toBe(1);
      } finally {
        await live.close();
      }
    } finally {
      await t.close();
    }
  }, 60_000);
});
