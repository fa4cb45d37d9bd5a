import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
import { emulatorEnv, setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Found by the model-based driver with two replicas (model-driver.spec.ts, MODEL_REPLICA=1 seed 31: Creds(delete) …
 * DoubleApprove → the approved refund "succeeded"). ARCHITECTURE "Scale": the gateway is stateless, every decision that
 * must hold across replicas lives in PostgreSQL. API.md §4/§7: once DELETE …/credentials answered 204 the org has no
 * credentials: a call ends failed / CREDENTIALS_NOT_FOUND and nothing reaches the vendor.
 * Replica B, which read the credentials a moment earlier, keeps using its cached copy (CredentialsService CACHE_TTL_MS =
 * 1 s, src/credentials/credentials.service.ts:56): a refund (money) is sent to Shopify with the deleted credentials
 * after the delete was acknowledged. (On the replica that took the DELETE the cache is invalidated, so it holds there.)
 */
describe('credentials deleted on one replica, a refund on another', () => {
  let h: Harness;
  let b: TestApp;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    b = await startTestApp({ ...emulatorEnv(h.emu.url), VENDOR_TIMEOUT_MS: '2000', VENDOR_CONNECT_TIMEOUT_MS: '500', APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await b?.close();
    await h?.close();
  });

  const refunds = () => h.emu.vendor<ShopifyEmulator>('shopify').refundCount('12345');

  it('a refund the policy allows, posted to B right after A answered the delete: CREDENTIALS_NOT_FOUND, no refund', async () => {
    const org = await setupOrg(h.t, {
      tools: ['order_lookup.lookup', 'shopify_refund.create'],
      rules: [{ id: 'ok', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }],
    });
    // B uses the org's credentials (a lookup), as any busy replica does
    const read = await b.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(read.body.status).toBe('succeeded');
    const del = await h.t.http.delete(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(bearer(org.adminKey));
    expect(del.status).toBe(204);
    const before = refunds();
    const res = await b.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '0.01' }));
    expect({ status: res.body.status, errorCode: res.body.errorCode, refundsSent: refunds() - before }).toEqual({ status: 'failed', errorCode: 'CREDENTIALS_NOT_FOUND', refundsSent: 0 });
  });

  it('an expert-approved refund decided on B right after A answered the delete: CREDENTIALS_NOT_FOUND, no refund', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const posted = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '0.01' }));
    expect(posted.status).toBe(202);
    const approval = ((await b.http.get('/v1/approvals?status=pending').set(bearer(expert.key))).body.items as { id: string; toolCallId: string; actionDigest: string }[]).find(
      (a) => a.toolCallId === posted.body.toolCallId,
    )!;
    const read = await b.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(read.body.status).toBe('succeeded');
    const del = await h.t.http.delete(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`).set(bearer(org.adminKey));
    expect(del.status).toBe(204);
    const before = refunds();
    const d = await b.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(d.status).toBe(200);
    const settled = await b.http.get(`/v1/tool-calls/${posted.body.toolCallId}/result?waitMs=8000`).set(bearer(org.agentKey));
    expect({ status: settled.body.status, errorCode: settled.body.errorCode, refundsSent: refunds() - before }).toEqual({ status: 'failed', errorCode: 'CREDENTIALS_NOT_FOUND', refundsSent: 0 });
  });
});
