/**
 * An expert approves a refund while the org × vendor slot is busy (the call stays `approved`, README "Approvals"), and
 * the key is revoked (found compromised) before the call starts: its approval no longer stands, and when the slot
 * frees the call ends blocked / APPROVAL_REVOKED with nothing sent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';
import { approvalFor, refundUse, refunds } from './support.js';

describe('an approval whose approver key was revoked before the call started', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_CONCURRENCY_LIMIT: '1', APPROVAL_TTL_SECONDS: '3600', VENDOR_TIMEOUT_MS: '10000' });
  });
  afterAll(async () => {
    h?.emu.clearFaults();
    await h?.close();
  });

  it('is withdrawn: the call ends blocked APPROVAL_REVOKED and no refund is sent', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('9.00'));
    expect(posted.status).toBe(202);
    const id = posted.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, id);
    const before = refunds(h);
    // A slow lookup holds the org's only Shopify slot.
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 5000, times: 1 });
    const lookup = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' })).then((r) => r);
    for (let i = 0; i < 100 && h.emu.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    const [row] = (await h.t.ds.query('SELECT status FROM tool_calls WHERE id = $1', [id])) as { status: string }[];
    expect(row.status).toBe('approved'); // waiting for the slot, not started
    expect((await h.t.http.delete(`/v1/api-keys/${expert.id}`).set(adminAuth)).status).toBe(204);
    await lookup;
    const settled = await h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=15000`).set(bearer(org.agentKey));
    expect({ call: settled.body.status, code: settled.body.errorCode, refundsSent: refunds(h) - before }).toEqual({
      call: 'blocked',
      code: 'APPROVAL_REVOKED',
      refundsSent: 0,
    });
    expect(settled.body.toolResult.content).toContain('withdrawn');
    const [event] = (await h.t.ds.query(`SELECT metadata FROM runtime_ledger_events WHERE tool_call_id = $1 AND type = 'tool_call.blocked'`, [id])) as {
      metadata: Record<string, unknown>;
    }[];
    expect(event.metadata).toMatchObject({ errorCode: 'APPROVAL_REVOKED', reason: 'approver_key_revoked', afterApproval: true });
    const [input] = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_call_inputs WHERE tool_call_id = $1', [id])) as { n: number }[];
    expect(input.n).toBe(0); // the raw input goes with the block
    const view = await h.t.http.get(`/v1/approvals/${approval.id}`).set(adminAuth);
    expect(view.body).toMatchObject({ status: 'approved', toolCallStatus: 'blocked', toolCallErrorCode: 'APPROVAL_REVOKED' });
  }, 40_000);
});
