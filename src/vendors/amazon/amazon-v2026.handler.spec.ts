import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AMAZON_EMULATOR_CREDENTIALS, AmazonEmulator } from '../../emulator/amazon.emulator.js';
import { AMAZON_FIXTURE_ORDERS, AMAZON_ORDER_IDS } from '../../emulator/amazon.fixtures.js';
import { orderV2026 } from '../../emulator/amazon.orders-v2026.js';
import { VendorEmulator } from '../../emulator/vendor-emulator.js';
import { TokenCache } from '../auth/token-cache.js';
import type { VendorCallContext, VendorEndpoints } from '../vendor-handler.js';
import { callContext, emulatorEndpoints, failure, TEST_USER_AGENT } from '../handler.spec-support.js';
import { AmazonHandler, MAX_ORDER_ITEM_PAGES } from './amazon.handler.js';
import { SpapiRates } from './spapi.client.js';

/** AmazonHandler on Orders v2026-01-01 (AMAZON_ORDERS_API=2026-01-01) against the emulator over HTTP. */
const CREDS = { ...AMAZON_EMULATOR_CREDENTIALS, region: 'na', marketplaceId: 'ATVPDKIKX0DER' };

let emu: VendorEmulator;
let amazon: AmazonEmulator;
let v0: VendorEndpoints;
let v2026: VendorEndpoints;

const ctx = (action: string, orderId: string): VendorCallContext =>
  callContext({ toolName: 'amazon_query', action, params: { orderId }, credentials: CREDS });
const orderPath = /^\/orders\/2026-01-01\/orders\/[^/]+$/;
const anyV0 = /^\/orders\/v0\//;
const calls = () => emu.requests.filter((r) => orderPath.test(r.path));

beforeAll(async () => {
  amazon = new AmazonEmulator();
  emu = new VendorEmulator([amazon]);
  const url = await emu.start();
  v0 = emulatorEndpoints(url);
  v2026 = emulatorEndpoints(url, { amazonOrdersApi: '2026-01-01' });
});
afterAll(() => emu.stop());
beforeEach(() => emu.reset());

describe('Orders v2026-01-01: same results as v0', () => {
  const ids = [AMAZON_ORDER_IDS.shipped, AMAZON_ORDER_IDS.paged, AMAZON_ORDER_IDS.pending, AMAZON_ORDER_IDS.manyPages];

  it('get_order gives exactly the v0 result for every fixture order, from one v2026 getOrder each', async () => {
    for (const id of ids) {
      const old = await new AmazonHandler(v0).execute(ctx('get_order', id));
      emu.reset();
      const now = await new AmazonHandler(v2026).execute(ctx('get_order', id));
      expect(old.ok, id).toBe(true);
      expect(now, id).toEqual(old);
      expect(JSON.stringify(now), id).toBe(JSON.stringify(old)); // same key order too: the model reads the same text
      expect(calls().map((r) => r.path), id).toEqual([`/orders/2026-01-01/orders/${id}`]);
      expect(emu.count({ path: anyV0 }), id).toBe(0);
    }
  });

  it("buyer.buyerEmail only where Amazon gives it: a merchant-fulfilled order unshipped, partly shipped or shipped, never an Amazon-fulfilled, pending or cancelled one", () => {
    const email = (changes: Record<string, unknown>) =>
      (orderV2026({ ...AMAZON_FIXTURE_ORDERS[AMAZON_ORDER_IDS.shipped], ...changes }, [], new Set(['BUYER'])).order.buyer as Record<string, unknown>).buyerEmail;
    for (const OrderStatus of ['Unshipped', 'PartiallyShipped', 'Shipped']) expect(email({ OrderStatus }), OrderStatus).toBe('q4w8e2r6t0y3u7i1@marketplace.amazon.com');
    for (const changes of [{ FulfillmentChannel: 'AFN' }, { OrderStatus: 'Pending' }, { OrderStatus: 'Canceled' }]) expect(email(changes), JSON.stringify(changes)).toBeUndefined();
  });

  it('the shared result is the no-RDT one: v0 gets no restricted parts from the emulator, v2026 gets them (PII role) and drops them', async () => {
    const id = AMAZON_ORDER_IDS.shipped;
    const old = await new AmazonHandler(v0).execute(ctx('get_order', id));
    // What the emulated v2026 answer carries for an app with the PII role.
    const { order } = orderV2026(AMAZON_FIXTURE_ORDERS[id], [], new Set(['BUYER', 'RECIPIENT']));
    expect(order).toMatchObject({ buyer: { buyerName: 'Marcus Webb' }, recipient: { deliveryAddress: { name: 'Marcus Webb', addressLine1: '1600 Fake Harbor Blvd' } } });
    const now = await new AmazonHandler(v2026).execute(ctx('get_order', id));
    const address = { City: 'Seattle', StateOrRegion: 'WA', PostalCode: '98101-1234', CountryCode: 'US' };
    expect(old).toMatchObject({ ok: true, data: { shippingAddress: address } });
    expect(now).toMatchObject({ ok: true, data: { shippingAddress: address } });
    for (const out of [old, now]) expect(JSON.stringify(out)).not.toMatch(/Marcus|Webb|Fake Harbor|555-0199/);
  });

  it('get_order_items gives exactly the v0 result, in one request and no NextToken loop', async () => {
    for (const id of [AMAZON_ORDER_IDS.shipped, AMAZON_ORDER_IDS.paged, AMAZON_ORDER_IDS.pending]) {
      const old = await new AmazonHandler(v0).execute(ctx('get_order_items', id));
      emu.reset();
      const now = await new AmazonHandler(v2026).execute(ctx('get_order_items', id));
      expect(old.ok, id).toBe(true);
      expect(JSON.stringify(now), id).toBe(JSON.stringify(old));
      expect(calls(), id).toHaveLength(1);
      expect(emu.count({ path: anyV0 }), id).toBe(0);
    }
  });

  it('an order with more items than v0 pages through comes back whole, not truncated (v2026 has no item paging)', async () => {
    const old = await new AmazonHandler(v0).execute(ctx('get_order_items', AMAZON_ORDER_IDS.manyPages));
    expect(old.ok && old.data).toMatchObject({ truncated: true });
    expect(old.ok && (old.data as { items: unknown[] }).items).toHaveLength(MAX_ORDER_ITEM_PAGES * 2);
    emu.reset();
    const now = await new AmazonHandler(v2026).execute(ctx('get_order_items', AMAZON_ORDER_IDS.manyPages));
    expect(now.ok && (now.data as { items: unknown[]; truncated?: boolean }).truncated).toBeUndefined();
    expect(now.ok && (now.data as { items: unknown[] }).items).toHaveLength(24);
    expect(calls()).toHaveLength(1);
  });

  it('sends the SP-API headers and asks only for the datasets each action returns (buyer and recipient PII only for get_order)', async () => {
    const handler = new AmazonHandler(v2026, new TokenCache());
    await handler.execute(ctx('get_order', AMAZON_ORDER_IDS.shipped));
    await handler.execute(ctx('get_order_items', AMAZON_ORDER_IDS.shipped));
    const [order, items] = calls();
    expect(new URLSearchParams(order.query).get('includedData')).toBe('BUYER,RECIPIENT,PROCEEDS,FULFILLMENT');
    expect(new URLSearchParams(items.query).get('includedData')).toBe('PROCEEDS,FULFILLMENT');
    expect(order.headers['x-amz-access-token']).toMatch(/^Atza\|/);
    expect(order.headers['user-agent']).toBe(TEST_USER_AGENT);
    expect(order.headers.accept).toBe('application/json');
    expect(amazon.tokenRequests).toBe(1);
  });
});

describe('Orders v2026-01-01: failures go through the shared SpapiSession', () => {
  it('an unknown order: 404 → not_found, not retried inside the handler', async () => {
    const out = failure(await new AmazonHandler(v2026).execute(ctx('get_order', AMAZON_ORDER_IDS.unknown)));
    expect(out).toMatchObject({ kind: 'not_found', vendorStatus: 404 });
    expect(failure(await new AmazonHandler(v2026).execute(ctx('get_order_items', AMAZON_ORDER_IDS.unknown)))).toMatchObject({ kind: 'not_found', vendorStatus: 404 });
    expect(calls()).toHaveLength(2);
  });

  it('an order answered about another order id is never handed back as the one asked for', async () => {
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 200, body: { order: { orderId: '999-9999999-9999999', orderItems: [] } }, times: 2 });
    for (const action of ['get_order', 'get_order_items']) {
      const out = failure(await new AmazonHandler(v2026).execute(ctx(action, AMAZON_ORDER_IDS.shipped)));
      expect(out, action).toMatchObject({ kind: 'bad_response', vendorStatus: 200 });
      expect(out.message).toMatch(/another order/);
    }
  });

  it('403 "expired": one refresh, one resend, success; a second refusal is auth', async () => {
    const handler = new AmazonHandler(v2026, new TokenCache());
    expect((await handler.execute(ctx('get_order', AMAZON_ORDER_IDS.shipped))).ok).toBe(true);
    amazon.expireAllTokens();
    expect((await handler.execute(ctx('get_order', AMAZON_ORDER_IDS.shipped))).ok).toBe(true);
    expect(amazon.tokenRequests).toBe(2);
    expect(calls()).toHaveLength(3);
    const expired = { errors: [{ code: 'Unauthorized', message: 'Access to requested resource is denied.', details: 'The access token you provided has expired.' }] };
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 403, body: expired, times: 2 });
    expect(failure(await handler.execute(ctx('get_order', AMAZON_ORDER_IDS.shipped)))).toMatchObject({ kind: 'auth', vendorStatus: 403 });
    expect(amazon.tokenRequests).toBe(3);
  });

  it('403 MissingAuthenticationToken is the configuration: rejected, no refresh', async () => {
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 403, body: { errors: [{ code: 'MissingAuthenticationToken', message: 'Missing Authentication Token' }] } });
    const out = failure(await new AmazonHandler(v2026, new TokenCache()).execute(ctx('get_order', AMAZON_ORDER_IDS.shipped)));
    expect(out).toMatchObject({ kind: 'rejected', vendorStatus: 403 });
    expect(amazon.tokenRequests).toBe(1);
  });

  it('429 waits 1/rate of the getOrder plan (0.5/s → 2 s); the v2026 bucket is learnt apart from v0 getOrder', async () => {
    const rates = new SpapiRates();
    const tokens = new TokenCache();
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 429 });
    const quota = failure(await new AmazonHandler(v2026, tokens, rates).execute(ctx('get_order', AMAZON_ORDER_IDS.shipped)));
    expect(quota).toMatchObject({ kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 2000 });
    expect(quota.message).toContain('QuotaExceeded');
    amazon.setRateLimit(20);
    expect((await new AmazonHandler(v2026, tokens, rates).execute(ctx('get_order', AMAZON_ORDER_IDS.shipped))).ok).toBe(true);
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 429 });
    expect(failure(await new AmazonHandler(v2026, tokens, rates).execute(ctx('get_order', AMAZON_ORDER_IDS.shipped)))).toMatchObject({ retryAfterMs: 50 });
    emu.fault({ vendor: 'amazon', path: /^\/orders\/v0\/orders\/[^/]+$/, kind: 'status', status: 429 });
    expect(failure(await new AmazonHandler(v0, tokens, rates).execute(ctx('get_order', AMAZON_ORDER_IDS.shipped)))).toMatchObject({ retryAfterMs: 2000 });
  });

  it('500 → server_error; a body that is not JSON → bad_response', async () => {
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 500 });
    expect(failure(await new AmazonHandler(v2026).execute(ctx('get_order', AMAZON_ORDER_IDS.shipped)))).toMatchObject({ kind: 'server_error', vendorStatus: 500 });
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'malformed' });
    expect(failure(await new AmazonHandler(v2026).execute(ctx('get_order_items', AMAZON_ORDER_IDS.shipped)))).toMatchObject({ kind: 'bad_response' });
  });

  it('a 2xx without `order` goes by its errors[0].code, else bad_response; {"order":{}} is not found; items need orderItems', async () => {
    const handler = new AmazonHandler(v2026);
    const answer = (body: object) => emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 200, body });
    // A v0-style wrapper is not a v2026 answer.
    answer({ payload: { AmazonOrderId: AMAZON_ORDER_IDS.shipped } });
    const wrapped = failure(await handler.execute(ctx('get_order', AMAZON_ORDER_IDS.shipped)));
    expect(wrapped).toMatchObject({ kind: 'bad_response', vendorStatus: 200 });
    expect(wrapped.message).toContain('"order"');
    answer({ errors: [{ code: 'QuotaExceeded', message: 'x' }] });
    expect(failure(await handler.execute(ctx('get_order', AMAZON_ORDER_IDS.shipped)))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 2000 });
    answer({ errors: [{ code: 'NotFound', message: 'x' }] });
    expect(failure(await handler.execute(ctx('get_order_items', AMAZON_ORDER_IDS.shipped)))).toMatchObject({ kind: 'not_found', vendorStatus: 200 });
    answer({ order: {} });
    expect(failure(await handler.execute(ctx('get_order', AMAZON_ORDER_IDS.shipped)))).toMatchObject({ kind: 'not_found', vendorStatus: 200 });
    answer({ order: 'nope' });
    expect(failure(await handler.execute(ctx('get_order', AMAZON_ORDER_IDS.shipped)))).toMatchObject({ kind: 'bad_response' });
    answer({ order: { orderId: AMAZON_ORDER_IDS.shipped, createdTime: '2026-08-02T14:05:11Z' } });
    expect(failure(await handler.execute(ctx('get_order_items', AMAZON_ORDER_IDS.shipped)))).toMatchObject({ kind: 'bad_response', vendorStatus: 200 });
  });

  it('AMAZON_ORDERS_API unset or v0 keeps the v0 paths', async () => {
    await new AmazonHandler(emulatorEndpoints(emu.url)).execute(ctx('get_order', AMAZON_ORDER_IDS.shipped));
    await new AmazonHandler(emulatorEndpoints(emu.url, { amazonOrdersApi: 'v0' })).execute(ctx('get_order_items', AMAZON_ORDER_IDS.shipped));
    expect(emu.requests.filter((r) => r.path.startsWith('/orders/')).map((r) => r.path)).toEqual([
      `/orders/v0/orders/${AMAZON_ORDER_IDS.shipped}`,
      `/orders/v0/orders/${AMAZON_ORDER_IDS.shipped}/orderItems`,
    ]);
  });
});
