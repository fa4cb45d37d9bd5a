import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AMAZON_EMULATOR_CREDENTIALS, AmazonEmulator } from './amazon.emulator.js';
import { AMAZON_ORDER_IDS } from './amazon.fixtures.js';
import { VendorEmulator } from './vendor-emulator.js';

/** The emulator's Orders v2026-01-01 getOrder, checked against orders_2026-01-01.json (amzn/selling-partner-api-models). */
let emu: VendorEmulator;
let url: string;

async function token(): Promise<string> {
  const c = AMAZON_EMULATOR_CREDENTIALS;
  const body = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: c.refreshToken, client_id: c.clientId, client_secret: c.clientSecret });
  const res = await fetch(`${url}/auth/o2/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
  return ((await res.json()) as { access_token: string }).access_token;
}

async function get(path: string, opts: { token?: string | null; method?: string } = {}) {
  const t = opts.token === undefined ? await token() : opts.token;
  const res = await fetch(`${url}${path}`, { method: opts.method ?? 'GET', headers: t === null ? {} : { 'x-amz-access-token': t } });
  return { status: res.status, rate: res.headers.get('x-amzn-ratelimit-limit'), requestId: res.headers.get('x-amzn-requestid'), body: (await res.json()) as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

const ALL = 'includedData=BUYER,RECIPIENT,PROCEEDS,FULFILLMENT';
const path = (id: string, query = ALL) => `/orders/2026-01-01/orders/${id}${query ? `?${query}` : ''}`;

beforeAll(async () => {
  emu = new VendorEmulator([new AmazonEmulator()]);
  url = await emu.start();
});
afterAll(() => emu.stop());
beforeEach(() => emu.reset());

describe('emulated Orders v2026-01-01 getOrder', () => {
  it('answers GetOrderResponse {order} (no payload wrapper) with the fields the model requires, from the v0 fixture', async () => {
    const res = await get(path(AMAZON_ORDER_IDS.shipped));
    expect(res.status).toBe(200);
    expect(res.rate).toBe('0.5');
    expect(Object.keys(res.body)).toEqual(['order']);
    const order = res.body.order;
    for (const required of ['orderId', 'createdTime', 'lastUpdatedTime', 'salesChannel', 'orderItems']) expect(order, required).toHaveProperty(required);
    expect(order).toMatchObject({
      orderId: AMAZON_ORDER_IDS.shipped,
      createdTime: '2026-08-02T14:05:11Z',
      salesChannel: { channelName: 'AMAZON', marketplaceId: 'ATVPDKIKX0DER' },
      buyer: { buyerEmail: 'q4w8e2r6t0y3u7i1@marketplace.amazon.com' },
      recipient: { deliveryAddress: { city: 'Seattle', postalCode: '98101-1234', countryCode: 'US' } },
      proceeds: { grandTotal: { amount: '64.98', currencyCode: 'USD' } },
      fulfillment: { fulfillmentStatus: 'SHIPPED', fulfilledBy: 'MERCHANT' },
    });
    expect(order.orderItems).toHaveLength(2);
    for (const item of order.orderItems) for (const required of ['orderItemId', 'quantityOrdered', 'product']) expect(item).toHaveProperty(required);
    expect(order.orderItems[0]).toMatchObject({
      product: { asin: 'B0EMU00001', sellerSku: 'EMU-SKU-001', price: { unitPrice: { amount: '49.99', currencyCode: 'USD' } } },
      proceeds: { breakdowns: [{ type: 'ITEM', subtotal: { amount: '49.99', currencyCode: 'USD' } }, { type: 'TAX' }] },
      fulfillment: { quantityFulfilled: 1, quantityUnfulfilled: 0 },
    });
  });

  it('includes a dataset only when includedData asks for it (csv or repeated keys); items always come', async () => {
    const bare = (await get(path(AMAZON_ORDER_IDS.shipped, ''))).body.order;
    for (const dataset of ['buyer', 'recipient', 'proceeds', 'fulfillment']) expect(bare).not.toHaveProperty(dataset);
    expect(bare.orderItems[0]).not.toHaveProperty('proceeds');
    expect(bare.orderItems[0]).not.toHaveProperty('fulfillment');
    expect(bare.orderItems[0].product.asin).toBe('B0EMU00001');
    const some = (await get(path(AMAZON_ORDER_IDS.shipped, 'includedData=FULFILLMENT&includedData=BUYER'))).body.order;
    expect(Object.keys(some)).toEqual(expect.arrayContaining(['buyer', 'fulfillment']));
    expect(some).not.toHaveProperty('recipient');
    expect(some).not.toHaveProperty('proceeds');
  });

  it('a Pending order has no recipient, as v0 has no ShippingAddress for it', async () => {
    const order = (await get(path(AMAZON_ORDER_IDS.pending))).body.order;
    expect(order).not.toHaveProperty('recipient');
    expect(order.fulfillment).toEqual({ fulfillmentStatus: 'PENDING', fulfilledBy: 'MERCHANT' });
  });

  it('unknown order → 404 NotFound, malformed id or includedData → 400 InvalidInput (ErrorList, with the rate)', async () => {
    const unknown = await get(path(AMAZON_ORDER_IDS.unknown));
    expect(unknown).toMatchObject({ status: 404, rate: '0.5', body: { errors: [{ code: 'NotFound' }] } });
    expect(await get(path('12-34'))).toMatchObject({ status: 400, body: { errors: [{ code: 'InvalidInput' }] } });
    expect(await get(path(AMAZON_ORDER_IDS.shipped, 'includedData=BUYER,ITEMS'))).toMatchObject({ status: 400, body: { errors: [{ code: 'InvalidInput' }] } });
  });

  it('checks the token like v0: missing / revoked / expired → 403 Unauthorized; other methods and sub-paths → 403 MissingAuthenticationToken', async () => {
    const missing = await get(path(AMAZON_ORDER_IDS.shipped), { token: null });
    expect(missing).toMatchObject({ status: 403, body: { errors: [{ code: 'Unauthorized', details: 'Access token is missing in the request header.' }] } });
    expect(await get(path(AMAZON_ORDER_IDS.shipped), { token: 'Atza|forged' })).toMatchObject({ status: 403, body: { errors: [{ code: 'Unauthorized' }] } });
    const t = await token();
    emu.vendor<AmazonEmulator>('amazon').expireAllTokens();
    expect((await get(path(AMAZON_ORDER_IDS.shipped), { token: t })).body.errors[0].details).toMatch(/expired/);
    expect(await get(path(AMAZON_ORDER_IDS.shipped), { method: 'POST' })).toMatchObject({ status: 403, body: { errors: [{ code: 'MissingAuthenticationToken' }] } });
    expect(await get(`/orders/2026-01-01/orders/${AMAZON_ORDER_IDS.shipped}/orderItems`)).toMatchObject({ status: 403, body: { errors: [{ code: 'MissingAuthenticationToken' }] } });
  });

  it('a 429 fault answers QuotaExceeded without the rate header, and the request is not applied', async () => {
    emu.fault({ vendor: 'amazon', path: /^\/orders\/2026-01-01\//, kind: 'status', status: 429 });
    const res = await get(path(AMAZON_ORDER_IDS.shipped));
    expect(res).toMatchObject({ status: 429, rate: null, body: { errors: [{ code: 'QuotaExceeded' }] } });
    expect(emu.count({ path: /^\/orders\/2026-01-01\//, applied: false })).toBe(1);
  });
});

describe('emulated Orders v0 getOrder', () => {
  it('a path under /orders/ that API Gateway does not route answers 403 MissingAuthenticationToken, not a 404 (VENDORS.md §2.3)', async () => {
    for (const p of [`/orders/v1/orders/${AMAZON_ORDER_IDS.shipped}`, '/orders/v0/shipments', `/orders/v0/orders/${AMAZON_ORDER_IDS.shipped}/buyerInfo`]) {
      expect(await get(p), p).toMatchObject({ status: 403, body: { errors: [{ code: 'MissingAuthenticationToken' }] } });
    }
  });

  it('a malformed order id is 400 InvalidInput with the rate, as in v2026 (VENDORS.md §2.3)', async () => {
    for (const p of ['/orders/v0/orders/not-an-id', '/orders/v0/orders/12-34/orderItems']) {
      expect(await get(p), p).toMatchObject({ status: 400, rate: '0.5', body: { errors: [{ code: 'InvalidInput' }] } });
    }
  });

  it('every SP-API answer carries x-amzn-RequestId, a 200 too (VENDORS.md §2.2)', async () => {
    const answers = [
      await get(`/orders/v0/orders/${AMAZON_ORDER_IDS.shipped}`),
      await get(`/orders/v0/orders/${AMAZON_ORDER_IDS.shipped}/orderItems`),
      await get(`/orders/v0/orders/${AMAZON_ORDER_IDS.unknown}`),
      await get(path(AMAZON_ORDER_IDS.shipped)),
      await get(path(AMAZON_ORDER_IDS.unknown)),
      await get(`/orders/v0/orders/${AMAZON_ORDER_IDS.shipped}`, { token: null }),
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 404, 403]);
    for (const a of answers) expect(a.requestId).toEqual(expect.stringMatching(/^\S+$/));
    expect(new Set(answers.map((a) => a.requestId)).size).toBe(answers.length);
  });

  it('answers as to a caller without a Restricted Data Token: no name, street, phone or buyer name (VENDORS.md §2.2)', async () => {
    const res = await get(`/orders/v0/orders/${AMAZON_ORDER_IDS.shipped}`);
    expect(res.status).toBe(200);
    expect(res.body.payload.ShippingAddress).toEqual({ City: 'Seattle', StateOrRegion: 'WA', PostalCode: '98101-1234', CountryCode: 'US' });
    expect(res.body.payload.BuyerInfo).toEqual({ BuyerEmail: 'q4w8e2r6t0y3u7i1@marketplace.amazon.com' });
    expect(res.body.payload).toMatchObject({ AmazonOrderId: AMAZON_ORDER_IDS.shipped, OrderStatus: 'Shipped', OrderTotal: { Amount: '64.98' } });
  });

  it('getOrderItems of a Pending order carries no ItemPrice / ItemTax, a Shipped one does (VENDORS.md §2.2)', async () => {
    const pending = await get(`/orders/v0/orders/${AMAZON_ORDER_IDS.pending}/orderItems`);
    expect(pending.status).toBe(200);
    const items = pending.body.payload.OrderItems as Record<string, unknown>[];
    expect(items.length).toBeGreaterThan(0);
    for (const item of items) {
      expect(item).toHaveProperty('ASIN');
      expect(item).not.toHaveProperty('ItemPrice');
      expect(item).not.toHaveProperty('ItemTax');
    }
    const shipped = (await get(`/orders/v0/orders/${AMAZON_ORDER_IDS.shipped}/orderItems`)).body.payload.OrderItems as Record<string, unknown>[];
    expect(shipped[0]).toMatchObject({ ItemPrice: { Amount: '49.99' }, ItemTax: { CurrencyCode: 'USD' } });
    // v2026 getOrder derives from the same items: no unit price and no proceeds for the Pending order's items either.
    const v2026 = (await get(path(AMAZON_ORDER_IDS.pending))).body.order;
    for (const item of v2026.orderItems) {
      expect(item.product).not.toHaveProperty('price');
      expect(item).not.toHaveProperty('proceeds');
    }
  });
});
