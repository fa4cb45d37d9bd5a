import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApprovedCallRunner } from '../../src/approvals/approved-call-runner.service.js';
import { Clock } from '../../src/common/clock.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { approvalFor, refundUse } from './support.js';

/**
 * An approved call whose input no loaded master key opens is remembered (ApprovedCallRunner.unreadable, at most
 * 10,000) so a sweep leaves it out for a minute and does not say it again. One that leaves `approved` elsewhere (its
 * run ended, ops reconciled it, a replica with the right key ran it) was remembered for the life of the process: over
 * weeks of a replica with an incomplete key set the map filled with dead ids, and every call unreadable after them
 * was said on every pass. Once its retry is due and it is no longer approved, it is forgotten.
 */
describe('approvals: unreadable calls settled elsewhere are forgotten', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** A refund approved with its input sealed under a key id this process has not loaded. */
  async function unreadableApproved(): Promise<{ id: string; runId: string; agentKey: string }> {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = (await createKey(h.t, org.orgId, 'expert')).key;
    const submitted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('2.00', '12345'));
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const id = submitted.body.toolCallId as string;
    await h.t.ds.query(`UPDATE tool_call_inputs SET key_id = 'k9' WHERE tool_call_id = $1`, [id]);
    const approval = await approvalFor(h, expert, id);
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    return { id, runId: org.runId, agentKey: org.agentKey };
  }

  it('a call whose run ended is forgotten once its retry is due; one still approved is kept, and said once', async () => {
    const runner = h.t.app.get(ApprovedCallRunner);
    const unreadable = (runner as unknown as { unreadable: Map<string, number> }).unreadable;
    const ended = await unreadableApproved();
    const waiting = await unreadableApproved();
    await waitFor(() => unreadable.has(ended.id) && unreadable.has(waiting.id), 'the runner to find both inputs unreadable', 10_000);
    const cancel = (c: { runId: string; agentKey: string }) => h.t.http.post(`/v1/runs/${c.runId}/cancel`).set(bearer(c.agentKey)).send({});
    expect((await cancel(ended)).status).toBe(200); // blocked RUN_NOT_ACTIVE: no decision or claim will forget it
    const said = (id: string) => h.t.logs.filter((l) => l.includes('no loaded master key opens its approved input') && l.includes(id)).length;
    expect(said(waiting.id)).toBe(1);

    const clock = h.t.app.get(Clock);
    await runner.sweep();
    expect(unreadable.has(ended.id)).toBe(true); // not due yet: nothing is read for it
    clock.advance(61_000);
    try {
      await runner.sweep();
      await runner.sweep();
    } finally {
      clock.advance(-61_000);
    }
    expect(unreadable.has(ended.id)).toBe(false);
    // Still approved and still unreadable: tried again, remembered again, not said again.
    await waitFor(() => unreadable.has(waiting.id), 'the still-approved call to be remembered again', 10_000);
    expect(said(waiting.id)).toBe(1);
    const [row] = (await h.t.ds.query('SELECT status FROM tool_calls WHERE id = $1', [waiting.id])) as { status: string }[];
    expect(row.status).toBe('approved');
    expect((await cancel(waiting)).status).toBe(200); // not left approved (and unreadable) on the shared database
  }, 60_000);
});
