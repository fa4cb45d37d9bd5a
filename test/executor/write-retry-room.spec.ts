import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ShopifyEmulator } from '../../src/emulator/index.js';
import { setupOrg, shopDomainOf, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { SHOPIFY_CLIENT_ID, SHOPIFY_CLIENT_SECRET } from '../support/secrets.js';
import { call } from './support.js';

/**
 * A write the vendor refused (429) is retried only with a quarter of the call's budget left: sent later, its answer
 * would likely come past the deadline and the call end indeterminate (ops reconcile it; the agent is told not to send
 * it again) though the vendor had cleanly refused it. The refusal, with its Retry-After, is the better answer then.
 */
describe('a write retried after a refusal needs room for its answer', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '2000' });
  });
  afterEach(() => {
    h.emu.clearFaults();
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    await h?.close();
  });

  const noteWrites = (from: number) => h.emu.requests.slice(from).filter((r) => /orderUpdate/.test(r.body));

  it('add_note refused 429 with Retry-After 1.9 s of a 2 s budget: not sent again; failed VENDOR_RATE_LIMITED, the note unchanged', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0); // no jitter: the retry would fall due ~100 ms before the deadline
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'], vendors: ['shopify'] });
    const shop = h.emu.vendor<ShopifyEmulator>('shopify');
    const before = shop.order(1001)?.note;
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'retry-after': '1.9' }, bodyMatch: /orderUpdate/, times: 1 });
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 250, bodyMatch: /orderUpdate/, times: 1 });
    const from = h.emu.requests.length;
    const res = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '1001', note: 'late retry' });
    expect(res.body).toMatchObject({ status: 'failed', errorCode: 'VENDOR_RATE_LIMITED' });
    expect(noteWrites(from)).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 300)); // nothing in flight that could still land
    expect(shop.order(1001)?.note).toBe(before);
  });

  it('with room left (Retry-After 0.2 s) the same refusal is retried and the note written once', async () => {
    vi.spyOn(Math, 'random').mockReturnValue(0);
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'], vendors: ['shopify'] });
    const shop = h.emu.vendor<ShopifyEmulator>('shopify');
    h.emu.fault({ vendor: 'shopify', kind: 'status', status: 429, headers: { 'retry-after': '0.2' }, bodyMatch: /orderUpdate/, times: 1 });
    const from = h.emu.requests.length;
    const res = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '1001', note: 'retried in time' });
    expect(res.body).toMatchObject({ status: 'succeeded' });
    expect(noteWrites(from)).toHaveLength(2);
    expect(shop.order(1001)?.note).toBe('retried in time');
  });

  /**
   * The handler's own sends after a token wait obey the same room: the first send after a slow token fetch, and the
   * resend after a 401 and a slow renewal. Sent with ~0.3 s of a 2 s budget, the write's answer came past the deadline
   * and a write Shopify never had, or had refused (401), ended OUTCOME_UNKNOWN.
   */
  describe('a write sent after a slow token fetch', () => {
    const TOKEN_PATH = /^\/admin\/oauth\/access_token$/;

    async function appOrg(tools: string[], ownShop: boolean, rules?: unknown[]): Promise<OrgSetup> {
      const org = await setupOrg(h.t, { tools, vendors: [], ...(rules ? { rules } : {}) });
      const put = await h.t.http
        .put(`/v1/orgs/${org.orgId}/integrations/shopify/credentials`)
        .set({ Authorization: `Bearer ${org.adminKey}` })
        .send({ config: { shopDomain: ownShop ? shopDomainOf(org.orgId) : 'acme-emulator.myshopify.com', clientId: SHOPIFY_CLIENT_ID, clientSecret: SHOPIFY_CLIENT_SECRET } });
      expect(put.status, JSON.stringify(put.body)).toBe(200);
      return org;
    }

    it('no cached token, the token endpoint takes 1.7 s of 2 s: add_note is not sent; failed VENDOR_TIMEOUT, the note unchanged', async () => {
      const org = await appOrg(['shopify_order.add_note'], true); // its own shop: no token of it cached yet
      const shop = h.emu.vendor<ShopifyEmulator>('shopify');
      const before = shop.order(1001)?.note;
      h.emu.fault({ vendor: 'shopify', path: TOKEN_PATH, kind: 'delay', delayMs: 1_700, times: 1 });
      h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 600, bodyMatch: /orderUpdate/, times: 1 });
      const from = h.emu.requests.length;
      const res = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '1001', note: 'first send after a slow token' });
      await new Promise((r) => setTimeout(r, 800)); // anything in flight lands
      expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT' });
      expect(noteWrites(from)).toHaveLength(0);
      expect(shop.order(1001)?.note).toBe(before);
    });

    it('a 401 to the cached token, then a renewal of 1.7 s: add_note is not resent; failed, not OUTCOME_UNKNOWN', async () => {
      const org = await appOrg(['order_lookup.lookup', 'shopify_order.add_note'], false);
      expect((await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' })).body.status).toBe('succeeded'); // the token is cached
      const shop = h.emu.vendor<ShopifyEmulator>('shopify');
      const before = shop.order(1001)?.note;
      h.emu.fault({ vendor: 'shopify', kind: 'status', status: 401, bodyMatch: /orderUpdate/, times: 1 });
      h.emu.fault({ vendor: 'shopify', path: TOKEN_PATH, kind: 'delay', delayMs: 1_700, times: 1 });
      h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 600, bodyMatch: /orderUpdate/, times: 1 });
      const from = h.emu.requests.length;
      const res = await call(h, org, 'shopify_order', { action: 'add_note', orderId: '1001', note: 'resent after a slow renewal' });
      await new Promise((r) => setTimeout(r, 800));
      expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT' });
      expect(noteWrites(from)).toHaveLength(1); // the one Shopify refused
      expect(shop.order(1001)?.note).toBe(before);
    });

    it('refund: a 401 to refundCreate, then a slow renewal: not resent; failed, and the order\'s lease given back', async () => {
      const org = await appOrg(['order_lookup.lookup', 'shopify_refund.create'], true, [{ id: 'allow-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' }]);
      expect((await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' })).body.status).toBe('succeeded');
      h.emu.fault({ vendor: 'shopify', kind: 'status', status: 401, bodyMatch: /refundCreate/, times: 1 });
      h.emu.fault({ vendor: 'shopify', path: TOKEN_PATH, kind: 'delay', delayMs: 1_700, times: 1 });
      h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 600, bodyMatch: /refundCreate/, times: 1 });
      const from = h.emu.requests.length;
      const res = await call(h, org, 'shopify_refund', { action: 'create', orderId: '12345', amount: '2.00' });
      await new Promise((r) => setTimeout(r, 800));
      const sent = h.emu.requests.slice(from).filter((r) => /refundCreate/.test(r.body));
      const leases = (await h.t.ds.query('SELECT 1 FROM shopify_refund_leases WHERE org_id = $1 AND lease_until > now()', [org.orgId])) as unknown[];
      expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: 'failed', errorCode: 'VENDOR_TIMEOUT' });
      expect(sent).toHaveLength(1);
      expect(sent.filter((r) => r.applied)).toHaveLength(0);
      expect(leases).toEqual([]);
    });
  });
});
