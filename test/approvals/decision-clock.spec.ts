import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { approvalFor, refunds, refundUse } from './support.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

/**
 * A decision is judged on the time it is written down, not the time it arrived: one that waited for the
 * approval's row (behind another decision, a run ending, a slow database) while the approval expired
 * answers 409, as every read in between already said "expired", and the refund never runs.
 */
describe('an approval decision is judged on the clock when it is recorded', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '60' });
  });
  afterAll(async () => {
    await h?.close();
  });

  async function pendingRefund(orderId: string) {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('1.00', orderId));
    expect(res.status).toBe(202);
    return { expert, toolCallId: res.body.toolCallId as string, approval: await approvalFor(h, expert.key, res.body.toolCallId) };
  }

  it('an approve that waited on the row lock past the expiry answers 409 and nothing runs', async () => {
    const { expert, toolCallId, approval } = await pendingRefund('77001');
    const clock = h.t.app.get(Clock);
    const holder = h.t.ds.createQueryRunner();
    await holder.connect();
    let seen: string | undefined;
    let answer: { status: number; body: { code?: string } } | undefined;
    try {
      await holder.startTransaction();
      await holder.query('SELECT id FROM approval_requests WHERE id = $1 FOR UPDATE', [approval.id]);
      const decision = h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest }).then((r) => r);
      // The decision is waiting for the row once its session shows up blocked on a lock.
      for (let i = 0; i < 200; i++) {
        const [w] = await h.t.ds.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%approval_requests%'`);
        if (w.n > 0) break;
        await new Promise((r) => setTimeout(r, 25));
      }
      clock.advance(120_000);
      seen = (await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(expert.key))).body.status;
      await holder.commitTransaction();
      answer = await decision;
    } finally {
      clock.advance(-120_000);
      await holder.release();
    }
    expect(seen).toBe('expired');
    expect(answer?.status).toBe(409);
    expect(answer?.body.code).toBe('APPROVAL_ALREADY_DECIDED');
    const [row] = await h.t.ds.query('SELECT a.status, t.status AS call_status, t.error_code FROM approval_requests a JOIN tool_calls t ON t.id = a.tool_call_id WHERE a.id = $1', [approval.id]);
    expect(row).toEqual({ status: 'expired', call_status: 'blocked', error_code: 'APPROVAL_EXPIRED' });
    expect(toolCallId).toBeTruthy();
    expect(refunds(h, '77001')).toBe(0);
  });

  it('a wrong digest on an expired approval answers what a right one does: already decided (expired)', async () => {
    const { expert, approval } = await pendingRefund('77002');
    const clock = h.t.app.get(Clock);
    clock.advance(120_000);
    try {
      const wrong = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: '0'.repeat(64) });
      expect(wrong.status).toBe(409);
      expect(wrong.body.code).toBe('APPROVAL_ALREADY_DECIDED');
      expect(wrong.body.detail).toContain('expired');
    } finally {
      clock.advance(-120_000);
    }
    // Before its expiry, a wrong digest is still named as such.
    const { expert: e2, approval: a2 } = await pendingRefund('77003');
    const fresh = await h.t.http.post(`/v1/approvals/${a2.id}/decision`).set(bearer(e2.key)).send({ decision: 'approve', actionDigest: '0'.repeat(64) });
    expect(fresh.status).toBe(409);
    expect(fresh.body.code).toBe('ACTION_DIGEST_MISMATCH');
  });
});
