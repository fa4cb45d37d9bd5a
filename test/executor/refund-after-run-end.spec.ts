/**
 * A refund that waits in the gateway for its order's refund lease (another refund of the same order is at Shopify)
 * has not reached the vendor. A run cancelled meanwhile answers 200 "from then on nothing new executes in the run;
 * calls already at the vendor finish" — yet the waiting refund was sent to Shopify seconds after that 200, and so was
 * a refund's retry after a Retry-After, and the same after the org's kill switch. The handler re-checked the org's
 * credentials after the lease wait, but not the run or the flag (found by a reviewer of run lifecycle races). Both
 * are now read before such a send (VendorCallContext.sendStanding): nothing is sent, the call ends failed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';
import { approvalFor, refundUse } from '../approvals/support.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('run end while a refund waits for its order lease', () => {
  let h: Harness;
  beforeAll(async () => {
    // 6 s budget: a refund may wait up to 3 s for the order's lease.
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600', VENDOR_TIMEOUT_MS: '6000' });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });
  const refundSends = (amount: string) => h.emu.requests.filter((r) => /refundCreate/.test(r.body) && r.body.includes(`"${amount}"`));

  it('approved refund queued on the lease: not sent to Shopify after the cancel was answered 200', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const a = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('4.01'));
    const b = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('4.02'));
    expect([a.status, b.status]).toEqual([202, 202]);
    const appA = await approvalFor(h, expert.key, a.body.toolCallId);
    const appB = await approvalFor(h, expert.key, b.body.toolCallId);
    // Refund A holds order 12345's lease at Shopify for 2 s.
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 2_000, bodyMatch: /refundCreate[\s\S]*"4\.01"/ });
    expect((await h.t.http.post(`/v1/approvals/${appA.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: appA.actionDigest })).status).toBe(200);
    await sleep(400);
    expect((await h.t.http.post(`/v1/approvals/${appB.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: appB.actionDigest })).status).toBe(200);
    await sleep(400); // B is claimed and waits for the order's lease: nothing of it at Shopify yet
    expect(refundSends('4.02')).toHaveLength(0);

    const cancel = await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.adminKey)).send({ reason: 'runaway refunds' });
    const answeredAt = Date.now();
    expect(cancel.status).toBe(200);
    expect(cancel.body.status).toBe('cancelled');

    await h.t.http.get(`/v1/tool-calls/${b.body.toolCallId}/result?waitMs=8000`).set(bearer(org.agentKey));
    const late = refundSends('4.02').filter((r) => r.receivedAt > answeredAt);
    const final = await h.t.http.get(`/v1/tool-calls/${b.body.toolCallId}/result`).set(bearer(org.agentKey));
    // Before: B's refundCreate reached Shopify ~1 s after the 200, and the call ended succeeded in a cancelled run.
    expect({ lateSends: late.map((r) => Math.round(r.receivedAt - answeredAt)), status: final.body.status, errorCode: final.body.errorCode }).toEqual({
      lateSends: [], status: 'failed', errorCode: 'EXECUTION_ERROR',
    });
    expect(refundSends('4.02')).toHaveLength(0);
  }, 30_000);

  it('direct refund (policy allows) queued on the lease: not sent after the cancel was answered 200', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'allow', match: {}, decision: 'allow' }] });
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 2_000, bodyMatch: /refundCreate[\s\S]*"5\.01"/ });
    const post = (amount: string) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(amount)).then((r) => r); // sent now (supertest is lazy)
    const first = post('5.01');
    await sleep(400);
    const second = post('5.02');
    await sleep(400);
    expect(refundSends('5.02')).toHaveLength(0);
    const cancel = await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.adminKey)).send({});
    const answeredAt = Date.now();
    expect(cancel.status).toBe(200);
    const [r1, r2] = await Promise.all([first, second]);
    const late = refundSends('5.02').filter((r) => r.receivedAt > answeredAt);
    expect({ lateSends: late.map((r) => Math.round(r.receivedAt - answeredAt)), first: r1.body.status ?? r1.body.code, second: [r2.body.status, r2.body.errorCode] }).toEqual({
      lateSends: [], first: 'succeeded', second: ['failed', 'EXECUTION_ERROR'],
    });
    const [row] = (await h.t.ds.query('SELECT error_text FROM tool_calls WHERE id = $1', [r2.body.toolCallId])) as { error_text: string }[];
    expect(row.error_text).toMatch(/the run ended while this refund waited for the order; nothing was sent/);
  }, 30_000);

  it('same wait, kill switch: a refund is not sent after tool_calling_enabled=false was answered 200', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'allow', match: {}, decision: 'allow' }] });
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 2_000, bodyMatch: /refundCreate[\s\S]*"6\.01"/ });
    const post = (amount: string) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(amount)).then((r) => r);
    const first = post('6.01');
    await sleep(400);
    const second = post('6.02');
    await sleep(400);
    expect(refundSends('6.02')).toHaveLength(0);
    const off = await h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false });
    const answeredAt = Date.now();
    expect(off.status).toBe(200);
    const [, r2] = await Promise.all([first, second]);
    const late = refundSends('6.02').filter((r) => r.receivedAt > answeredAt);
    expect(late.map((r) => Math.round(r.receivedAt - answeredAt))).toEqual([]);
    expect([r2.body.status, r2.body.errorCode]).toEqual(['failed', 'EXECUTION_ERROR']);
  }, 30_000);

  it('a refund Shopify throttled (429, nothing applied) is not re-sent after the cancel was answered 200', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'allow', match: {}, decision: 'allow' }] });
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'Retry-After': '2' }, times: 1, bodyMatch: /refundCreate[\s\S]*"8\.01"/ });
    const call = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('8.01')).then((r) => r);
    await sleep(700); // refused once, the gateway sleeps on Retry-After
    expect(refundSends('8.01')).toHaveLength(1);
    const cancel = await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.adminKey)).send({});
    const answeredAt = Date.now();
    expect(cancel.status).toBe(200);
    const res = await call;
    const late = refundSends('8.01').filter((r) => r.receivedAt > answeredAt);
    // Ended on the refusal it had: nothing of it applied, nothing sent again.
    expect({ lateSends: late.map((r) => Math.round(r.receivedAt - answeredAt)), status: [res.body.status, res.body.errorCode] }).toEqual({ lateSends: [], status: ['failed', 'VENDOR_RATE_LIMITED'] });
  }, 30_000);
});
