import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import type { AmazonEmulator, JumioEmulator, ShopifyEmulator } from '../../src/emulator/index.js';
import { JUMIO_EXECUTION_IDS } from '../../src/emulator/jumio.emulator.js';
import { recordMintedSecret } from '../../src/emulator/minted-secrets.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { AMAZON_CLIENT_SECRET, SHOPIFY_CLIENT_ID, SHOPIFY_CLIENT_SECRET } from '../support/secrets.js';
import { call } from './support.js';

/** A refresh token the emulator refuses: stored like any other, and the run-wide leak scan looks for it too. */
const REVOKED_REFRESH_TOKEN = 'Atzr|revoked';
recordMintedSecret('tokens.spec revoked Amazon refresh token', REVOKED_REFRESH_TOKEN);

/**
 * Access tokens of Amazon (LWA) and Jumio (OAuth2) are cached per credential
 * and refreshed single-flight (VENDORS.md §2.5, §3.4). The gateway's cache is
 * process-wide and every test org uses the emulator's one credential, so the
 * counts below are deltas at the emulator.
 */
describe('vendor access tokens through the pipeline', () => {
  let h: Harness;
  let org: OrgSetup;
  let amazon: AmazonEmulator;
  let jumio: JumioEmulator;
  beforeAll(async () => {
    // 20 concurrent calls to one vendor must not hit the org × vendor lease.
    h = await startHarness({ VENDOR_CONCURRENCY_LIMIT: '50' });
    org = await setupOrg(h.t, { tools: ['amazon_query.get_order', 'amazon_query.get_order_items', 'kyc.get_status'], vendors: ['amazon', 'jumio'] });
    amazon = h.emu.vendor<AmazonEmulator>('amazon');
    jumio = h.emu.vendor<JumioEmulator>('jumio');
  });
  afterAll(async () => {
    await h?.close();
  });

  const getOrder = () => call(h, org, 'amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped });
  const getItems = () => call(h, org, 'amazon_query', { action: 'get_order_items', orderId: AMAZON_ORDER_IDS.shipped });
  const kyc = () => call(h, org, 'kyc', { action: 'get_status', workflowExecutionId: JUMIO_EXECUTION_IDS.initiated });

  it('many Amazon calls, sequential and concurrent, share one LWA token request', async () => {
    expect(amazon.tokenRequests).toBe(0);
    for (let i = 0; i < 5; i++) expect((await (i % 2 ? getItems() : getOrder())).body.status).toBe('succeeded');
    const burst = await Promise.all(Array.from({ length: 15 }, (_, i) => (i % 2 ? getItems() : getOrder())));
    expect(burst.map((r) => r.body.status)).toEqual(Array(15).fill('succeeded'));
    expect(amazon.tokenRequests).toBe(1);
    expect(h.emu.count({ vendor: 'amazon', path: /^\/orders\// })).toBe(20);
  });

  it('an expired LWA token: 20 concurrent calls cause exactly one refresh, and every call succeeds', async () => {
    await getOrder();
    const tokensBefore = amazon.tokenRequests;
    amazon.expireAllTokens();
    const results = await Promise.all(Array.from({ length: 20 }, () => getOrder()));
    expect(results.map((r) => `${r.status} ${r.body.status}`)).toEqual(Array(20).fill('200 succeeded'));
    expect(amazon.tokenRequests - tokensBefore).toBe(1);
    const rows = (await h.t.ds.query('SELECT retry_count FROM tool_calls WHERE id = ANY($1)', [results.map((r) => r.body.toolCallId)])) as {
      retry_count: number;
    }[];
    // The refresh-and-resend happens inside the handler: it is not an executor retry.
    expect(rows.every((r) => r.retry_count === 0)).toBe(true);
  });

  it('then later calls reuse the refreshed token', async () => {
    const tokensBefore = amazon.tokenRequests;
    await Promise.all([getOrder(), getItems(), getOrder()]);
    expect(amazon.tokenRequests).toBe(tokensBefore);
  });

  it('Jumio: one token for many calls; after expiry 20 concurrent calls → one refresh', async () => {
    const first = await Promise.all(Array.from({ length: 10 }, () => kyc()));
    expect(first.map((r) => r.body.status)).toEqual(Array(10).fill('succeeded'));
    expect(jumio.tokenRequests).toBe(1);
    jumio.expireAllTokens();
    const again = await Promise.all(Array.from({ length: 20 }, () => kyc()));
    expect(again.map((r) => r.body.status)).toEqual(Array(20).fill('succeeded'));
    expect(jumio.tokenRequests).toBe(2);
  });

  it('a rejected refresh token → CREDENTIALS_INVALID without retries', async () => {
    const bad = await setupOrg(h.t, { tools: ['amazon_query.get_order'], vendors: [] });
    const put = await h.t.http
      .put(`/v1/orgs/${bad.orgId}/integrations/amazon/credentials`)
      .set({ Authorization: `Bearer ${bad.adminKey}` })
      .send({ config: { clientId: 'amzn1.application-oa2-client.emulator', clientSecret: AMAZON_CLIENT_SECRET, refreshToken: REVOKED_REFRESH_TOKEN, region: 'na' } });
    expect(put.status).toBeLessThan(300);
    const tokensBefore = amazon.tokenRequests;
    const res = await call(h, bad, 'amazon_query', { action: 'get_order', orderId: AMAZON_ORDER_IDS.shipped });
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'CREDENTIALS_INVALID' });
    expect(amazon.tokenRequests - tokensBefore).toBe(1);
  });

  it('Shopify with an app\'s client id and secret: one token for many calls; after expiry 20 concurrent calls → one renewal; no secret in the ledger', async () => {
    const app = await setupOrg(h.t, { tools: ['order_lookup.lookup'], vendors: [] });
    const put = await h.t.http
      .put(`/v1/orgs/${app.orgId}/integrations/shopify/credentials`)
      .set({ Authorization: `Bearer ${app.adminKey}` })
      .send({ config: { shopDomain: 'acme-emulator.myshopify.com', clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET } });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(JSON.stringify(put.body)).not.toContain(SHOPIFY_CLIENT_SECRET);
    const shop = h.emu.vendor<ShopifyEmulator>('shopify');
    const grants = () => h.emu.count({ vendor: 'shopify', path: /^\/admin\/oauth\/access_token$/ });
    const lookup = () => call(h, app, 'order_lookup', { action: 'lookup', orderId: '12345' });
    const first = await Promise.all(Array.from({ length: 10 }, () => lookup()));
    expect(first.map((r) => r.body.status)).toEqual(Array(10).fill('succeeded'));
    expect(grants()).toBe(1);
    shop.expireGrantedTokens();
    const again = await Promise.all(Array.from({ length: 20 }, () => lookup()));
    expect(again.map((r) => r.body.status)).toEqual(Array(20).fill('succeeded'));
    expect(grants()).toBe(2);
    const rows = (await h.t.ds.query('SELECT row_to_json(t)::text AS dump FROM tool_calls t WHERE org_id = $1', [app.orgId])) as { dump: string }[];
    expect(rows).toHaveLength(30);
    for (const r of rows) expect(r.dump).not.toContain(SHOPIFY_CLIENT_SECRET);
  });
});
