import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { ToolCallsService } from '../../src/tool-calls/tool-calls.service.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { approvalFor, refundUse, refunds } from './support.js';

/**
 * README Approvals: an approved call that finds no free slot "stays approved, new calls there are refused 429
 * CONCURRENCY_LIMIT until it has a slot". Once it no longer waits — its run ended (blocked RUN_NOT_ACTIVE), or another
 * replica settled it — it will never take that slot: new calls of the org × vendor (in other runs) are not refused for
 * it while slots are free, though the reservation has not lapsed (10 s).
 */
describe('the slot kept for an approved call that no longer waits', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  /**
   * A refund approved while every shopify slot of a fresh org is busy: deferred, with the next free slot kept for it.
   * `meanwhile` runs while the slots are still busy; then they are all given back.
   */
  async function deferredRefund(amount: string, meanwhile: (org: OrgSetup, toolCallId: string) => Promise<void>) {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create', 'order_lookup.lookup'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(amount));
    expect(res.status).toBe(202);
    const toolCallId = res.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, toolCallId);
    const calls = h.t.app.get(ToolCallsService);
    const held: (() => void)[] = [];
    for (let r = calls.leaseFor(org.orgId, 'shopify'); r; r = calls.leaseFor(org.orgId, 'shopify')) held.push(r);
    try {
      const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
      expect(decided.status).toBe(200);
      await waitFor(() => h.t.logs.some((l) => l.includes('approved call deferred') && l.includes(toolCallId)), 'the approved call to be deferred');
      expect(calls.reservationHolders()).toContain(toolCallId);
      await meanwhile(org, toolCallId);
    } finally {
      for (const r of held) r(); // every slot free again
    }
    return { org, toolCallId, calls };
  }

  it('new calls of the org are not refused 429 once the approved call is blocked by its run end and slots are free', async () => {
    const before = refunds(h);
    const { org, toolCallId } = await deferredRefund('0.99', async (o) => {
      // The agent's conversation ends: the approved-but-not-started refund is blocked RUN_NOT_ACTIVE (README, runs).
      expect((await h.t.http.post(`/v1/runs/${o.runId}/complete`).set(bearer(o.agentKey)).send({})).status).toBe(200);
    });
    const blocked = await h.t.http.get(`/v1/tool-calls/${toolCallId}/result`).set(bearer(org.agentKey));
    expect(blocked.body).toMatchObject({ status: 'blocked', errorCode: 'RUN_NOT_ACTIVE' });
    // Another conversation of the org, all 8 slots free: a plain order lookup.
    const run2 = await h.t.http.post('/v1/runs').set(bearer(org.agentKey)).send({ specialistId: 'support' });
    const lookup = await h.t.http.post(`/v1/runs/${run2.body.id}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(lookup.status, JSON.stringify(lookup.body)).toBe(200);
    expect(lookup.body.status).toBe('succeeded');
    expect(refunds(h)).toBe(before);
  });

  it('settled on another replica: the slot kept for it is let go here, by the slot given back (or the next sweep), and nothing is sent', async () => {
    const before = refunds(h);
    const { org, toolCallId, calls } = await deferredRefund('0.98', async (o, id) => {
      // Another replica ended the run: this process heard nothing of it (no settled call here), the row says so.
      await h.t.ds.query(`UPDATE tool_calls SET status = 'blocked', error_code = 'RUN_NOT_ACTIVE', http_status = 403, finished_at = now(), updated_at = now() WHERE id = $1 AND status = 'approved'`, [id]);
      const refused = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
      expect([refused.status, refused.body.code]).toEqual([429, 'CONCURRENCY_LIMIT']); // no slot free, and one kept for it
    });
    // A slot given back woke it: it found the call settled elsewhere and let its kept slot go. A sweep would too.
    await waitFor(() => !calls.reservationHolders().includes(toolCallId), 'the kept slot let go');
    await h.t.app.get(ApprovedCallRunner).sweep();
    expect(calls.reservationHolders()).not.toContain(toolCallId);
    const lookup = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(lookup.status, JSON.stringify(lookup.body)).toBe(200);
    expect(refunds(h)).toBe(before);
  });
});
