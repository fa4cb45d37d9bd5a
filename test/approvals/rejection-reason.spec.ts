import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { approvalFor, refundUse, refunds, waitingRefund } from './support.js';

interface ToolResultBody {
  status: string;
  errorCode: string | null;
  replayed: boolean;
  toolResult: { type: string; tool_use_id: string; content: string; is_error: boolean };
}

/**
 * A rejected call's tool_result carries the reason its decider gave (README "Approvals"): the model reads why, and can
 * change course (offer store credit, ask the customer) rather than guess or send the same call again. The reason is
 * the approval's `decisionReason` — redacted when it was written, and checked by ledger verify against the decision
 * event's `reasonDigest` — read with the call, so a result long-poll, a later read and a replay all say it.
 */
describe("a rejection's reason reaches the model", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  const result = async (key: string, toolCallId: string): Promise<ToolResultBody> => {
    const res = await h.t.http.get(`/v1/tool-calls/${toolCallId}/result`).set(bearer(key));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as ToolResultBody;
  };

  it("an expert's reason: in the result's content, and in a replay of the same tool_use; no refund ran", async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const use = refundUse('7.00', '12345');
    const before = refunds(h, '12345');
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(posted.status, JSON.stringify(posted.body)).toBe(202);
    const toolCallId = posted.body.toolCallId as string;
    const approval = await approvalFor(h, expert.key, toolCallId);
    const reason = 'Over the goodwill limit: offer a "store credit" instead';
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'reject', actionDigest: approval.actionDigest, reason });
    expect(decided.status, JSON.stringify(decided.body)).toBe(200);

    const expected = `An expert reviewed this action and rejected it, giving this reason: ${JSON.stringify(reason)}. It was not executed.`;
    const read = await result(org.agentKey, toolCallId);
    expect(read).toMatchObject({ status: 'blocked', errorCode: 'EXPERT_REJECTED', toolResult: { tool_use_id: use.id, content: expected, is_error: true } });

    const replay = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    expect(replay.status, JSON.stringify(replay.body)).toBe(403);
    expect(replay.body).toMatchObject({ replayed: true, errorCode: 'EXPERT_REJECTED', toolResult: { content: expected } });
    expect(refunds(h, '12345')).toBe(before);
  });

  it('none given: the plain sentence; a credential pasted into the reason reaches the model redacted, as it is stored', async () => {
    const plain = await waitingRefund(h, '2.00');
    const ok = await h.t.http.post(`/v1/approvals/${plain.approval.id}/decision`).set(bearer(plain.expert.key)).send({ decision: 'reject', actionDigest: plain.approval.actionDigest });
    expect(ok.status).toBe(200);
    expect((await result(plain.org.agentKey, plain.toolCallId)).toolResult.content).toBe('An expert reviewed this action and rejected it. It was not executed.');

    const pasted = await waitingRefund(h, '3.00');
    const token = `shpat_${'0123456789abcdef'.repeat(2)}`;
    const decided = await h.t.http
      .post(`/v1/approvals/${pasted.approval.id}/decision`)
      .set(bearer(pasted.expert.key))
      .send({ decision: 'reject', actionDigest: pasted.approval.actionDigest, reason: `use the other token ${token} next time` });
    expect(decided.status).toBe(200);
    const content = (await result(pasted.org.agentKey, pasted.toolCallId)).toolResult.content;
    expect(content).toMatch(/^An expert reviewed this action and rejected it, giving this reason: "use the other token .*REDACTED.* next time"\. It was not executed\.$/);
    expect(content).not.toContain(token);
  });

  it("the customer's reason on a client approval the agent rejects", async () => {
    const org = await setupOrg(h.t, {
      tools: ['order_lookup.lookup', 'shopify_order.add_note'],
      rules: [{ id: 'client-notes', match: { toolName: 'shopify_order.add_note' }, decision: 'require_client_approval' }],
    });
    const posted = await h.t.http
      .post(`/v1/runs/${org.runId}/tool-calls`)
      .set(bearer(org.agentKey))
      .send(toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note: 'gift wrap' }));
    expect(posted.status, JSON.stringify(posted.body)).toBe(202);
    const toolCallId = posted.body.toolCallId as string;
    const approval = await approvalFor(h, org.agentKey, toolCallId);
    expect(approval.kind).toBe('client');
    const decided = await h.t.http
      .post(`/v1/approvals/${approval.id}/decision`)
      .set(bearer(org.agentKey))
      .send({ decision: 'reject', actionDigest: approval.actionDigest, reason: 'not a gift after all' });
    expect(decided.status, JSON.stringify(decided.body)).toBe(200);
    expect(await result(org.agentKey, toolCallId)).toMatchObject({
      status: 'blocked',
      errorCode: 'CLIENT_REJECTED',
      toolResult: { content: 'The customer rejected this action, giving this reason: "not a gift after all". It was not executed.' },
    });
  });
});
