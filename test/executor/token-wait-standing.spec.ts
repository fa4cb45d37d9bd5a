/**
 * A call that waited for its access token (a slow token endpoint: LWA, Shopify's client-credentials grant) was sent to
 * the vendor after the org's kill switch or its run's end had been answered 200 — a write included — where the
 * refund's lease wait and a retry's Retry-After sleep already asked again (sendStanding). Now a caller that waited for
 * a token request asks before the token is handed out (GetTokenOptions.afterWait): nothing is sent, and the call ends
 * failed EXECUTION_ERROR saying why.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';
import { SHOPIFY_CLIENT_ID, SHOPIFY_CLIENT_SECRET } from '../support/secrets.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const WHY = /(the org's tool calling was turned off|the run ended) while this call waited for its access token; nothing was sent/;

describe('the kill switch or the run end while a call waits for its access token', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '8000' });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  const errorTextOf = async (id: string) => ((await h.t.ds.query('SELECT error_text FROM tool_calls WHERE id = $1', [id])) as { error_text: string }[])[0]?.error_text;

  async function shopifyClientCredsOrg() {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'], vendors: [] });
    const put = await h.t.http
      .put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`)
      .set(adminAuth)
      .send({ config: { shopDomain: `org-${org.orgId.replace(/-/g, '')}.myshopify.com`, clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET } });
    expect(put.status).toBe(200);
    return org;
  }
  const noteSends = (note: string) => h.emu.requests.filter((r) => /orderUpdate/.test(r.body) && r.body.includes(note));

  it('shopify_order.add_note (a write): not sent to Shopify after tool_calling_enabled=false was answered 200', async () => {
    const org = await shopifyClientCredsOrg();
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 2_000, path: /oauth\/access_token/ });
    const call = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey))
      .send(toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note: 'kill-1' })).then((r) => r);
    await sleep(600); // the call is running, waiting for Shopify's token endpoint
    expect(noteSends('kill-1')).toHaveLength(0);
    const off = await h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false, reason: 'incident' });
    const answeredAt = Date.now();
    expect(off.status).toBe(200);
    const res = await call;
    const late = noteSends('kill-1').filter((r) => r.receivedAt > answeredAt);
    expect({ lateSends: late.map((r) => Math.round(r.receivedAt - answeredAt)), status: res.body.status, errorCode: res.body.errorCode }).toEqual({ lateSends: [], status: 'failed', errorCode: 'EXECUTION_ERROR' });
    expect(String(await errorTextOf(res.body.toolCallId))).toMatch(WHY);
  }, 30_000);

  it('shopify_order.add_note: not sent to Shopify after the run cancel was answered 200', async () => {
    const org = await shopifyClientCredsOrg();
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 2_000, path: /oauth\/access_token/ });
    const call = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey))
      .send(toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note: 'kill-2' })).then((r) => r);
    await sleep(600);
    expect(noteSends('kill-2')).toHaveLength(0);
    const cancel = await h.t.http.post(`/v1/runs/${org.runId}/cancel`).set(bearer(org.adminKey)).send({ reason: 'runaway' });
    const answeredAt = Date.now();
    expect(cancel.status).toBe(200);
    const res = await call;
    const late = noteSends('kill-2').filter((r) => r.receivedAt > answeredAt);
    expect({ lateSends: late.map((r) => Math.round(r.receivedAt - answeredAt)), status: res.body.status, errorCode: res.body.errorCode }).toEqual({ lateSends: [], status: 'failed', errorCode: 'EXECUTION_ERROR' });
    expect(String(await errorTextOf(res.body.toolCallId))).toMatch(WHY);
  }, 30_000);

  it('amazon get_order (LWA token slow): no SP-API request after tool_calling_enabled=false was answered 200', async () => {
    const org = await setupOrg(h.t, { tools: ['amazon_query.get_order'], vendors: ['amazon'] });
    h.emu.fault({ vendor: 'amazon', kind: 'delay', delayMs: 2_000, path: /auth\/o2\/token/ });
    const from = h.emu.requests.length;
    const call = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey))
      .send(toolUse('amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped })).then((r) => r);
    await sleep(600);
    const off = await h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false });
    const answeredAt = Date.now();
    expect(off.status).toBe(200);
    const res = await call;
    const late = h.emu.requests.slice(from).filter((r) => /orders/.test(r.path) && r.receivedAt > answeredAt);
    expect({ lateSends: late.map((r) => `${r.method} ${r.path} +${Math.round(r.receivedAt - answeredAt)}ms`), status: res.body.status, errorCode: res.body.errorCode }).toEqual({ lateSends: [], status: 'failed', errorCode: 'EXECUTION_ERROR' });
    expect(String(await errorTextOf(res.body.toolCallId))).toMatch(/the org's tool calling was turned off while this call waited for its access token; nothing was sent/);
  }, 30_000);
});
