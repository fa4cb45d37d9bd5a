import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { approvalFor, refundUse, refunds } from './support.js';

/**
 * An expert approval is the second pair of eyes a risky call needs. An admin key may both post tool calls and decide
 * expert approvals, so it could approve its own refund: it is refused (403), while another admin or expert key may
 * decide, and the asking key may still reject (withdraw) its own call.
 */
describe('four eyes: an expert approval is not given by the key that asked for the call', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  async function refundAskedByAdmin(amount: string, runBy?: string) {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const run = await h.t.http.post('/v1/runs').set(bearer(runBy ?? org.adminKey)).send({ specialistId: 'support' });
    expect(run.status).toBe(201);
    const res = await h.t.http.post(`/v1/runs/${run.body.id}/tool-calls`).set(bearer(org.adminKey)).send(refundUse(amount));
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const id = res.body.toolCallId as string;
    const approval = await approvalFor(h, org.adminKey, id);
    expect(approval.kind).toBe('expert');
    return { org, id, approval };
  }
  const decide = (key: string, approval: { id: string; actionDigest: string }, decision: 'approve' | 'reject') =>
    h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(key)).send({ decision, actionDigest: approval.actionDigest });

  it('the asking admin key cannot approve (403, still pending, nothing sent); another admin key can, and the refund is sent once', async () => {
    const before = refunds(h, '12345');
    const { org, id, approval } = await refundAskedByAdmin('1.00');
    const own = await decide(org.adminKey, approval, 'approve');
    expect(own.status).toBe(403);
    expect(own.body).toMatchObject({ code: 'FORBIDDEN' });
    expect((await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(org.adminKey))).body).toMatchObject({ status: 'pending' });
    expect(refunds(h, '12345')).toBe(before);
    const other = await createKey(h.t, org.orgId, 'admin');
    expect((await decide(other.key, approval, 'approve')).status).toBe(200);
    const settled = await h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=8000`).set(bearer(org.adminKey));
    expect(settled.body.status).toBe('succeeded');
    expect(refunds(h, '12345')).toBe(before + 1);
  });

  it('nor can the admin key that started the run approve a call of it; the asking key may reject its own call', async () => {
    const { org, approval } = await refundAskedByAdmin('2.00');
    const starter = await createKey(h.t, org.orgId, 'admin');
    const run = await h.t.http.post('/v1/runs').set(bearer(starter.key)).send({ specialistId: 'support' });
    const res = await h.t.http.post(`/v1/runs/${run.body.id}/tool-calls`).set(bearer(org.adminKey)).send(refundUse('3.00'));
    const startersRun = await approvalFor(h, org.adminKey, res.body.toolCallId as string);
    expect((await decide(starter.key, startersRun, 'approve')).status).toBe(403);
    expect((await decide(org.adminKey, approval, 'reject')).status).toBe(200);
  });
});
