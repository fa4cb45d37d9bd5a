/**
 * An approved call's claim commits, its answer is lost (the database blips on this replica: pg's query_timeout), and
 * the kill switch (or the run's end) is answered 200 before the claim is sent again. The resend found its own claim
 * (`re`: the event with its token) and returned the call running without judging the flag or the run again: the
 * approved write was sent to the vendor after the 200. Now the resumed call is recorded failed, not sent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sql } from '../../src/db/sql.js';
import { CLAIM_APPROVED_CALL_SQL } from '../../src/approvals/approved-call-claim.sql.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';
import { approvalFor } from './support.js';

describe('an approved call: claim answer lost, then the kill switch or the run end, then the claim resend', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });
  const noteSends = (note: string) => h.emu.requests.filter((r) => /orderUpdate/.test(r.body) && r.body.includes(note));

  async function scenario(note: string, change: (org: Awaited<ReturnType<typeof setupOrg>>) => Promise<{ status: number }>) {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'], rules: [{ id: 'ask', match: {}, decision: 'require_expert_approval' }] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const call = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey))
      .send(toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note }));
    expect(call.status).toBe(202);
    const approval = await approvalFor(h, expert.key, call.body.toolCallId);

    const sql = h.t.app.get(Sql);
    const original = sql.query.bind(sql);
    let answeredAt = 0;
    let armed = true;
    let changed!: () => void;
    const changeDone = new Promise<void>((r) => (changed = r));
    (sql as { query: typeof sql.query }).query = (async (text: string, params: unknown[] = []) => {
      const rows = await original(text, params);
      if (armed && text === CLAIM_APPROVED_CALL_SQL && params[0] === call.body.toolCallId) {
        armed = false;
        const res = await change(org);
        answeredAt = Date.now();
        expect(res.status).toBe(200);
        changed();
        throw new Error('Query read timeout'); // the claim committed; its answer is lost
      }
      return rows;
    }) as typeof sql.query;
    try {
      const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
      expect(decided.status).toBe(200);
      await changeDone;
      const result = await h.t.http.get(`/v1/tool-calls/${call.body.toolCallId}/result?waitMs=8000`).set(bearer(org.agentKey));
      const late = noteSends(note).filter((r) => r.receivedAt > answeredAt);
      const [row] = (await h.t.ds.query('SELECT error_text FROM tool_calls WHERE id = $1', [call.body.toolCallId])) as { error_text: string }[];
      // The agent is told nothing was sent (vendor_refused false), not that the tool failed.
      expect(result.body.toolResult?.content).toMatch(/nothing was sent to the vendor/);
      return { late: late.map((r) => Math.round(r.receivedAt - answeredAt)), status: result.body.status, errorCode: result.body.errorCode, errorText: row.error_text };
    } finally {
      (sql as { query: unknown }).query = original;
    }
  }

  it('tool_calling_enabled=false answered 200 before the claim resend: the approved write is not sent', async () => {
    const seen = await scenario('claim-lost-1', (org) => h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false }));
    expect(seen).toEqual({ late: [], status: 'failed', errorCode: 'EXECUTION_ERROR', errorText: expect.stringMatching(/^the org's tool calling was turned off while its claim was being recorded .*nothing was sent$/) });
  }, 30_000);

  it('run cancel answered 200 before the claim resend: the approved write is not sent', async () => {
    const seen = await scenario('claim-lost-2', (org) => h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.adminKey)).send({}));
    expect(seen).toEqual({ late: [], status: 'failed', errorCode: 'EXECUTION_ERROR', errorText: expect.stringMatching(/^its run ended while its claim was being recorded .*nothing was sent$/) });
  }, 30_000);
});
