import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { AMAZON_EMULATOR_CREDENTIALS, AmazonEmulator } from '../../emulator/amazon.emulator.js';
import { AMAZON_ORDER_IDS } from '../../emulator/amazon.fixtures.js';
import { VendorEmulator } from '../../emulator/vendor-emulator.js';
import { TokenCache } from '../auth/token-cache.js';
import type { VendorCallContext, VendorEndpoints } from '../vendor-handler.js';
import { callContext, emulatorEndpoints, failure, TEST_USER_AGENT } from '../handler.spec-support.js';
import { AmazonHandler, MAX_ORDER_ITEM_PAGES } from './amazon.handler.js';

const CREDS = { ...AMAZON_EMULATOR_CREDENTIALS, region: 'na', marketplaceId: 'ATVPDKIKX0DER' };

let emu: VendorEmulator;
let amazon: AmazonEmulator;
let endpoints: VendorEndpoints;

function ctx(action: string, params: Record<string, unknown>, credentials: Record<string, unknown> = CREDS): VendorCallContext {
  return callContext({ toolName: 'amazon_query', action, params, credentials });
}

const orderPath = /^\/orders\/v0\/orders\/[^/]+$/;
const itemsPath = /\/orderItems$/;
const lwaPath = /^\/auth\/o2\/token$/;

beforeAll(async () => {
  amazon = new AmazonEmulator();
  emu = new VendorEmulator([amazon]);
  const url = await emu.start();
  endpoints = emulatorEndpoints(url);
});

afterAll(() => emu.stop());
beforeEach(() => emu.reset());

describe('AmazonHandler happy paths', () => {
  it('get_order returns the compact order and sends the SP-API headers', async () => {
    const out = await new AmazonHandler(endpoints, new TokenCache()).execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }));
    expect(out).toEqual({
      ok: true,
      vendorStatus: 200,
      data: {
        orderId: '112-0000001-1234567',
        status: 'Shipped',
        purchaseDate: '2026-08-02T14:05:11Z',
        fulfillmentChannel: 'MFN',
        orderTotal: { currency: 'USD', amount: '64.98' },
        buyerEmail: 'q4w8e2r6t0y3u7i1@marketplace.amazon.com',
        // Only what getOrder gives without an RDT (VENDORS.md §2.2): no name, street or phone.
        shippingAddress: { City: 'Seattle', StateOrRegion: 'WA', PostalCode: '98101-1234', CountryCode: 'US' },
      },
    });
    const lwa = emu.requests.find((r) => r.path === '/auth/o2/token')!;
    expect(lwa.headers['content-type']).toContain('application/x-www-form-urlencoded');
    expect(new URLSearchParams(lwa.body).get('grant_type')).toBe('refresh_token');
    const call = emu.requests.find((r) => orderPath.test(r.path))!;
    expect(call.headers['x-amz-access-token']).toMatch(/^Atza\|/);
    expect(call.headers['user-agent']).toBe(TEST_USER_AGENT);
    expect(call.headers.accept).toBe('application/json');
  });

  it('get_order_items returns the items of a one-page order', async () => {
    const out = await new AmazonHandler(endpoints).execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.shipped }));
    expect(out).toEqual({
      ok: true,
      vendorStatus: 200,
      data: {
        orderId: AMAZON_ORDER_IDS.shipped,
        items: [
          { asin: 'B0EMU00001', sku: 'EMU-SKU-001', title: 'Aurora Trail Running Shoe - 9 / Blue', quantityOrdered: 1, quantityShipped: 1, itemPrice: { currency: 'USD', amount: '49.99' } },
          { asin: 'B0EMU00002', sku: 'EMU-SKU-002', title: 'Trail Socks (3 pack)', quantityOrdered: 1, quantityShipped: 1, itemPrice: { currency: 'USD', amount: '14.99' } },
        ],
      },
    });
  });

  it('get_order_items follows NextToken pages', async () => {
    const out = await new AmazonHandler(endpoints).execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.paged }));
    expect(out.ok && (out.data as { items: unknown[] }).items).toHaveLength(5);
    expect(emu.count({ path: itemsPath })).toBe(3);
    expect(out.ok && (out.data as { truncated?: boolean }).truncated).toBeUndefined();
  });

  it('stops after a bounded number of pages and says the list is truncated', async () => {
    const out = await new AmazonHandler(endpoints).execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.manyPages }));
    expect(emu.count({ path: itemsPath })).toBe(MAX_ORDER_ITEM_PAGES);
    expect(out.ok && out.data).toMatchObject({ truncated: true });
    expect(out.ok && (out.data as { items: unknown[] }).items).toHaveLength(MAX_ORDER_ITEM_PAGES * 2);
  });
});

describe('AmazonHandler getOrderItems with a NextToken that repeats', () => {
  const skus = (out: unknown): string[] => (out as { data: { items: { sku: string }[] } }).data.items.map((i) => i.sku);

  it('a page that answers its own NextToken again: stops at once, the items so far once, truncated', async () => {
    amazon.loopItemsPages({ from: 2, to: 2 }); // page 2 says "next: page 2"
    const out = await new AmazonHandler(endpoints).execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.paged }));
    // Not MAX_ORDER_ITEM_PAGES requests with page 2 appended each time: page 1, page 2, stop.
    expect(emu.count({ path: itemsPath })).toBe(2);
    expect(skus(out)).toEqual(['EMU-SKU-101', 'EMU-SKU-102']);
    expect(out).toMatchObject({ ok: true, data: { truncated: true } });
  });

  it('a NextToken asked for before, further back: not followed again', async () => {
    amazon.loopItemsPages({ from: 6, to: 2 }); // page 4 says "next: page 2"
    const out = await new AmazonHandler(endpoints).execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.manyPages }));
    expect(emu.count({ path: itemsPath })).toBe(4);
    expect(skus(out)).toHaveLength(6);
    expect(new Set(skus(out)).size).toBe(6);
    expect(out).toMatchObject({ ok: true, data: { truncated: true } });
  });

  it('a repeat of a token asked for by an earlier attempt of the same call is seen too (429 on page 3, then resumed)', async () => {
    amazon.loopItemsPages({ from: 4, to: 2 }); // page 3 says "next: page 2"
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'delay', delayMs: 0, times: 2 });
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 429, times: 1 });
    const handler = new AmazonHandler(endpoints, new TokenCache());
    const call = ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.manyPages });
    expect(failure(await handler.execute(call))).toMatchObject({ kind: 'rate_limited' });
    const out = await handler.execute({ ...call, attempt: 1 });
    expect(emu.count({ path: itemsPath })).toBe(4); // 1, 2, 3 (429), 3
    expect(skus(out)).toEqual(['EMU-SKU-300', 'EMU-SKU-301', 'EMU-SKU-302', 'EMU-SKU-303']);
    expect(out).toMatchObject({ ok: true, data: { truncated: true } });
    expect(call.scratch.size).toBe(0);
  });

  it('a server that answers the same NextToken on every page, page 1 included (the reviewer case)', async () => {
    const seen: string[] = [];
    const server = createServer((req, res) => {
      res.setHeader('content-type', 'application/json');
      if (req.url?.startsWith('/auth/o2/token')) {
        res.end(JSON.stringify({ access_token: 'Atza|x', token_type: 'bearer', expires_in: 3600 }));
        return;
      }
      seen.push(req.url ?? '');
      res.setHeader('x-amzn-ratelimit-limit', '0.5');
      res.end(JSON.stringify({ payload: { AmazonOrderId: AMAZON_ORDER_IDS.shipped, NextToken: 'SAME', OrderItems: [{ ASIN: 'B0DUP00001', OrderItemId: '1', SellerSKU: 'SKU-1', QuantityOrdered: 1 }] } }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const out = await new AmazonHandler(emulatorEndpoints(url), new TokenCache()).execute(
        ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.shipped }, { clientId: 'c', clientSecret: 's', refreshToken: 'Atzr|r', region: 'na' }),
      );
      expect(seen).toHaveLength(2);
      expect(skus(out)).toEqual(['SKU-1']);
      expect(out).toMatchObject({ ok: true, data: { truncated: true } });
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe('AmazonHandler LWA tokens', () => {
  it('fetches ONE token for many calls', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    for (let i = 0; i < 5; i++) expect((await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }))).ok).toBe(true);
    await Promise.all(Array.from({ length: 10 }, () => handler.execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.shipped }))));
    expect(amazon.tokenRequests).toBe(1);
  });

  it('shares one token fetch between concurrent first calls', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    const outs = await Promise.all(Array.from({ length: 20 }, () => handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }))));
    expect(outs.every((o) => o.ok)).toBe(true);
    expect(amazon.tokenRequests).toBe(1);
  });

  it('refreshes the token ahead of expiry (injected clock)', async () => {
    let now = Date.now();
    const handler = new AmazonHandler(endpoints, new TokenCache({ now: () => now }));
    await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }));
    now += 3_500_000; // inside expires_in (3600 s) minus the 60 s margin
    await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }));
    expect(amazon.tokenRequests).toBe(1);
    now += 50_000; // now within the last 60 s
    expect((await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }))).ok).toBe(true);
    expect(amazon.tokenRequests).toBe(2);
  });

  it('a slow LWA inside the 60 s margin does not hold the call: the cached, unexpired token is used and refreshed behind it', async () => {
    let now = Date.now();
    const handler = new AmazonHandler(endpoints, new TokenCache({ now: () => now }));
    const getOrder = (signal: AbortSignal) => handler.execute(callContext({ toolName: 'amazon_query', action: 'get_order', params: { orderId: AMAZON_ORDER_IDS.shipped }, credentials: CREDS, signal }));
    const tokensUsed = () => emu.requests.filter((r) => orderPath.test(r.path)).map((r) => r.headers['x-amz-access-token']);
    expect((await getOrder(new AbortController().signal)).ok).toBe(true);
    now += 3_550_000; // 50 s before the token's real expiry: inside the refresh margin
    emu.fault({ vendor: 'amazon', path: lwaPath, kind: 'delay', delayMs: 1_000 }); // LWA slow, not down
    // The call's budget is shorter than the token request: waiting for it would time the call out.
    const out = await getOrder(AbortSignal.timeout(300));
    expect(out.ok).toBe(true);
    expect(new Set(tokensUsed()).size).toBe(1);
    // The refresh went on in the background; once it lands, calls use the new token.
    await vi.waitFor(async () => {
      await getOrder(new AbortController().signal);
      expect(new Set(tokensUsed()).size).toBe(2);
    }, { timeout: 3_000, interval: 100 });
    expect(amazon.tokenRequests).toBe(2);
  });

  it('on 403 "expired": invalidates, refreshes once and retries once', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }));
    amazon.expireAllTokens();
    const out = await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }));
    expect(out.ok).toBe(true);
    expect(amazon.tokenRequests).toBe(2);
    expect(emu.count({ path: orderPath })).toBe(3);
  });

  it('20 concurrent calls with an expired token cause exactly one refresh', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }));
    amazon.expireAllTokens();
    const outs = await Promise.all(Array.from({ length: 20 }, () => handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }))));
    expect(outs.every((o) => o.ok)).toBe(true);
    expect(amazon.tokenRequests).toBe(2);
    expect(emu.count({ path: lwaPath })).toBe(2);
  });

  it('gives up with auth after one refresh when the token keeps coming back expired', async () => {
    const expired = { errors: [{ code: 'Unauthorized', message: 'Access to requested resource is denied.', details: 'The access token you provided has expired.' }] };
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 403, body: expired, times: 2 });
    const out = failure(await new AmazonHandler(endpoints, new TokenCache()).execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped })));
    expect(out).toMatchObject({ kind: 'auth', vendorStatus: 403 });
    expect(emu.count({ path: orderPath })).toBe(2);
    expect(amazon.tokenRequests).toBe(2);
  });

  it('any other 403 is auth without a refresh', async () => {
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 403 });
    const out = failure(await new AmazonHandler(endpoints, new TokenCache()).execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped })));
    expect(out).toMatchObject({ kind: 'auth', vendorStatus: 403, requestSent: true });
    expect(amazon.tokenRequests).toBe(1);
    expect(emu.count({ path: orderPath })).toBe(1);
  });

  it('LWA invalid_grant / invalid_client are auth failures and nothing reaches SP-API', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    const badGrant = failure(await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }, { ...CREDS, refreshToken: 'Atzr|revoked' })));
    expect(badGrant).toMatchObject({ kind: 'auth', vendorStatus: 400, requestSent: false });
    expect(badGrant.message).toContain('invalid_grant');
    const badClient = failure(await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }, { ...CREDS, clientSecret: 'rotated-away' })));
    expect(badClient).toMatchObject({ kind: 'auth', vendorStatus: 401, requestSent: false });
    expect(badClient.message).not.toContain('rotated-away');
    expect(emu.count({ path: orderPath })).toBe(0);
  });

  it('does not cache a failed token fetch', async () => {
    emu.fault({ vendor: 'amazon', path: lwaPath, kind: 'status', status: 503 });
    const handler = new AmazonHandler(endpoints, new TokenCache());
    expect(failure(await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped })))).toMatchObject({ kind: 'server_error', requestSent: false });
    expect((await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }))).ok).toBe(true);
  });
});

describe('AmazonHandler failures', () => {
  it('429 QuotaExceeded (no Retry-After) before any rate is known → rate_limited, wait 1/rate of the documented plan (0.5/s → 2 s)', async () => {
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 429 });
    const out = failure(await new AmazonHandler(endpoints).execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped })));
    expect(out).toMatchObject({ kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 2000 });
    expect(out.message).toContain('QuotaExceeded');
  });

  it('500 → server_error', async () => {
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 500 });
    expect(failure(await new AmazonHandler(endpoints).execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped })))).toMatchObject({
      kind: 'server_error',
      vendorStatus: 500,
    });
  });

  it('a server error on a later items page fails the whole call', async () => {
    // Faults apply in order: page 1 passes (a zero delay), page 2 gets the 503.
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'delay', delayMs: 0, times: 1 });
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 503, times: 1 });
    const out = failure(await new AmazonHandler(endpoints).execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.paged })));
    expect(out).toMatchObject({ kind: 'server_error', vendorStatus: 503 });
    expect(emu.count({ path: itemsPath })).toBe(2);
  });

  it('200 {"payload":{}} for a well-formed unknown id → not_found', async () => {
    const out = failure(await new AmazonHandler(endpoints).execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.unknown })));
    expect(out).toMatchObject({ kind: 'not_found', vendorStatus: 200 });
  });

  it('200 without a payload is not "not found": {} → bad_response, {"errors":[...]} → classified by errors[0].code', async () => {
    const handler = new AmazonHandler(endpoints);
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 200, body: {} });
    expect(failure(await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped })))).toMatchObject({ kind: 'bad_response', vendorStatus: 200 });
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 200, body: { other: 1 } });
    expect(failure(await handler.execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.shipped })))).toMatchObject({ kind: 'bad_response', vendorStatus: 200 });
    const errors = (code: string) => ({ errors: [{ code, message: 'x', details: '' }] });
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 200, body: errors('InternalFailure') });
    expect(failure(await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped })))).toMatchObject({ kind: 'server_error', vendorStatus: 200 });
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 200, body: errors('QuotaExceeded') });
    expect(failure(await handler.execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.shipped })))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 2000 });
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 200, body: errors('NotFound') });
    expect(failure(await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped })))).toMatchObject({ kind: 'not_found', vendorStatus: 200 });
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 200, body: errors('SomethingNew') });
    const unknown = failure(await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped })));
    expect(unknown).toMatchObject({ kind: 'bad_response', vendorStatus: 200 });
    expect(unknown.message).toContain('SomethingNew');
  });

  it('an answer naming another order than the one asked for (a cache or proxy mixing answers up) is never handed back as this one', async () => {
    const other = '999-9999999-9999999';
    const handler = new AmazonHandler(endpoints);
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 200, body: { payload: { AmazonOrderId: other, OrderItems: [{ ASIN: 'B0OTHER', Title: "Another customer's item", QuantityOrdered: 1, OrderItemId: '1' }] } } });
    const items = failure(await handler.execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.shipped })));
    expect(items).toMatchObject({ kind: 'bad_response', vendorStatus: 200 });
    expect(items.message).toMatch(/another order/);
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 200, body: { payload: { AmazonOrderId: other, OrderStatus: 'Shipped' } } });
    expect(failure(await handler.execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped })))).toMatchObject({ kind: 'bad_response', vendorStatus: 200 });
    // A later page of the listing names another order: the whole call fails, none of its items are handed back.
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 200, body: { payload: { AmazonOrderId: AMAZON_ORDER_IDS.shipped, OrderItems: [{ ASIN: 'B0MINE' }], NextToken: 'page-2' } } });
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 200, body: { payload: { AmazonOrderId: other, OrderItems: [{ ASIN: 'B0OTHER' }] } } });
    expect(failure(await handler.execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.shipped })))).toMatchObject({ kind: 'bad_response', vendorStatus: 200 });
    // The order asked for, and an answer that names none, are taken as they are.
    expect((await handler.execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.shipped }))).ok).toBe(true);
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 200, body: { payload: { OrderItems: [{ ASIN: 'B0MINE' }] } } });
    expect(await handler.execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.shipped }))).toMatchObject({ ok: true, data: { items: [{ asin: 'B0MINE' }] } });
  });

  it('404 → not_found', async () => {
    const out = failure(await new AmazonHandler(endpoints).execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.unknown })));
    expect(out).toMatchObject({ kind: 'not_found', vendorStatus: 404 });
  });

  it('a body that is not JSON → bad_response', async () => {
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'malformed' });
    expect(failure(await new AmazonHandler(endpoints).execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped })))).toMatchObject({ kind: 'bad_response' });
  });

  it('a malformed order id never leaves the gateway', async () => {
    const out = failure(await new AmazonHandler(endpoints).execute(ctx('get_order', { orderId: '../../auth/o2/token' })));
    expect(out).toMatchObject({ kind: 'rejected', requestSent: false });
    expect(emu.requests).toHaveLength(0);
  });

  it('incomplete credentials → auth, nothing sent', async () => {
    const out = failure(await new AmazonHandler(endpoints).execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }, { ...CREDS, region: 'us-east-1' })));
    expect(out).toMatchObject({ kind: 'auth', requestSent: false });
    expect(out.message).toContain('region');
    expect(emu.requests).toHaveLength(0);
  });

  it('never puts secrets in failure messages', async () => {
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 403 });
    const out = failure(await new AmazonHandler(endpoints).execute(ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped })));
    for (const secret of [CREDS.clientSecret, CREDS.refreshToken, 'Atza|']) expect(out.message).not.toContain(secret);
  });
});

describe('AmazonHandler rate limits (VENDORS.md §2.4, §2.5)', () => {
  const order = (): VendorCallContext => ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped });

  it('a 429 waits 1/rate of the live rate the operation last reported, per operation', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    amazon.setRateLimit(20);
    expect((await handler.execute(order())).ok).toBe(true); // learns getOrder: 20/s
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 429 });
    expect(failure(await handler.execute(order()))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 50 });
    // getOrderItems has its own bucket, not yet reported: the documented plan.
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 429 });
    expect(failure(await handler.execute(ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.shipped })))).toMatchObject({ retryAfterMs: 2000 });
    // A slower plan reported later replaces the faster one.
    amazon.setRateLimit(0.2);
    expect((await handler.execute(order())).ok).toBe(true);
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 429 });
    expect(failure(await handler.execute(order()))).toMatchObject({ retryAfterMs: 5000 });
  });

  it('the rate is remembered per seller authorisation and region: the same seller in another region still waits the documented 2 s', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    amazon.setRateLimit(20);
    expect((await handler.execute(order())).ok).toBe(true);
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 429 });
    const other = ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped }, { ...CREDS, region: 'eu', marketplaceId: 'A1PA6795UKMFR9' });
    expect(failure(await handler.execute(other))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 2000 });
  });

  it('a Retry-After, if something in between adds one, wins over 1/rate', async () => {
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 429, headers: { 'retry-after': '3' } });
    expect(failure(await new AmazonHandler(endpoints).execute(order()))).toMatchObject({ retryAfterMs: 3000 });
  });

  it('a 429 from LWA without Retry-After waits a second; never sends the SP-API request', async () => {
    emu.fault({ vendor: 'amazon', path: lwaPath, kind: 'status', status: 429 });
    expect(failure(await new AmazonHandler(endpoints, new TokenCache()).execute(order()))).toMatchObject({ kind: 'rate_limited', retryAfterMs: 1000, requestSent: false });
    expect(emu.count({ path: orderPath })).toBe(0);
  });
});

describe('AmazonHandler re-auth on Unauthorized after a cached token (VENDORS.md §2.5)', () => {
  const order = (): VendorCallContext => ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped });

  it('a cached token refused as revoked (not "expired"): one refresh, one retry, success', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    expect((await handler.execute(order())).ok).toBe(true);
    amazon.revokeAllTokens();
    expect((await handler.execute(order())).ok).toBe(true);
    expect(amazon.tokenRequests).toBe(2);
    expect(emu.count({ path: orderPath })).toBe(3);
  });

  it('a cached token refused, and the fresh one refused too: auth after exactly one refresh', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    expect((await handler.execute(order())).ok).toBe(true);
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 403, times: 2 });
    expect(failure(await handler.execute(order()))).toMatchObject({ kind: 'auth', vendorStatus: 403 });
    expect(amazon.tokenRequests).toBe(2);
    expect(emu.count({ path: orderPath })).toBe(3);
  });

  it('a 403 MissingAuthenticationToken (a host or path API Gateway does not route) is the configuration, not the credentials: rejected at once, no refresh', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    expect((await handler.execute(order())).ok).toBe(true);
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 403, body: { errors: [{ code: 'MissingAuthenticationToken', message: 'Missing Authentication Token' }] } });
    const out = failure(await handler.execute(order()));
    expect(out).toMatchObject({ kind: 'rejected', vendorStatus: 403 });
    expect(out.message).toContain('AMAZON_SPAPI_BASE_URL');
    expect(amazon.tokenRequests).toBe(1);
  });

  it('the same MissingAuthenticationToken given only in x-amzn-ErrorType, with an empty body (amzn/selling-partner-api-models#749): rejected, no refresh', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    expect((await handler.execute(order())).ok).toBe(true);
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 403, body: '', headers: { 'x-amzn-ErrorType': 'MissingAuthenticationTokenException' } });
    const out = failure(await handler.execute(order()));
    expect(out).toMatchObject({ kind: 'rejected', vendorStatus: 403 });
    expect(out.message).toContain('AMAZON_SPAPI_BASE_URL');
    expect(amazon.tokenRequests).toBe(1);
  });
});

describe('AmazonHandler re-auth on a 401 (read like 403 Unauthorized, VENDORS.md §2.5)', () => {
  const order = (): VendorCallContext => ctx('get_order', { orderId: AMAZON_ORDER_IDS.shipped });
  const expired = { errors: [{ code: 'Unauthorized', message: 'Access to requested resource is denied.', details: 'The access token you provided has expired.' }] };
  const tokensUsed = (): string[] => emu.requests.filter((r) => orderPath.test(r.path)).map((r) => r.headers['x-amz-access-token']);

  it('a cached token refused with 401: dropped, one refresh, one retry, success; later calls keep the new token', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    expect((await handler.execute(order())).ok).toBe(true);
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 401, body: expired });
    expect((await handler.execute(order())).ok).toBe(true);
    expect((await handler.execute(order())).ok).toBe(true);
    expect(amazon.tokenRequests).toBe(2);
    const [first, refused, retried, later] = tokensUsed();
    expect(refused).toBe(first);
    expect(retried).not.toBe(first);
    expect(later).toBe(retried);
  });

  it('a fresh token refused with 401 "expired": one refresh, then auth', async () => {
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 401, body: expired, times: 2 });
    expect(failure(await new AmazonHandler(endpoints, new TokenCache()).execute(order()))).toMatchObject({ kind: 'auth', vendorStatus: 401 });
    expect(amazon.tokenRequests).toBe(2);
    expect(emu.count({ path: orderPath })).toBe(2);
  });

  it('a fresh token refused with a 401 that does not say "expired": auth at once, no refresh', async () => {
    emu.fault({ vendor: 'amazon', path: orderPath, kind: 'status', status: 401 });
    expect(failure(await new AmazonHandler(endpoints, new TokenCache()).execute(order()))).toMatchObject({ kind: 'auth', vendorStatus: 401 });
    expect(amazon.tokenRequests).toBe(1);
    expect(emu.count({ path: orderPath })).toBe(1);
  });
});

describe('AmazonHandler getOrderItems resumes a retried call at the page that failed', () => {
  // The paged order has 5 items, 2 per page: 3 pages.
  const items = (): VendorCallContext => ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.paged });
  const pageRequests = (): { query: string }[] => emu.requests.filter((r) => itemsPath.test(r.path));
  /** Page 1 answers; page 2 gets a 429 (faults apply in order: a zero delay lets the first request through). */
  const quotaOnPage2 = (): void => {
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'delay', delayMs: 0, times: 1 });
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 429, times: 1 });
  };

  it('a 429 on page 2: the retry asks for page 2, not page 1 again, and returns every item once', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    quotaOnPage2();
    const call = items();
    expect(failure(await handler.execute(call))).toMatchObject({ kind: 'rate_limited' });
    const out = await handler.execute({ ...call, attempt: 1 });
    expect(out.ok).toBe(true);
    const got = (out as { data: { items: { sku: string }[]; truncated?: boolean } }).data;
    expect(got.items.map((i) => i.sku)).toEqual([...new Set(got.items.map((i) => i.sku))]);
    expect(got.items).toHaveLength(5);
    expect(got.items.every((i) => typeof i.sku === 'string')).toBe(true);
    expect(got.truncated).toBeUndefined();
    const pages = pageRequests();
    expect(pages).toHaveLength(4); // 1, 2 (429), then 2, 3
    expect(pages[0].query).toBe('');
    expect(pages[2].query).toBe(pages[1].query);
    expect(pages[2].query).toContain('NextToken=');
  });

  it('another call (its own scratch) starts at page 1; a finished call leaves nothing behind', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    quotaOnPage2();
    const first = items();
    failure(await handler.execute(first));
    const other = items();
    expect((await handler.execute(other)).ok).toBe(true);
    expect(pageRequests()[2].query).toBe('');
    expect(other.scratch.size).toBe(0);
    expect(first.scratch.size).toBe(1);
  });

  it('a resumed NextToken that SP-API refuses (400) starts the listing over from page 1, once', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    quotaOnPage2();
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 400, times: 1 });
    const call = items();
    failure(await handler.execute(call));
    const out = await handler.execute({ ...call, attempt: 1 });
    expect(out.ok && (out.data as { items: unknown[] }).items).toHaveLength(5);
    expect(pageRequests().map((r) => r.query === '')).toEqual([true, false, false, true, false, false]);
  });

  it('a second refusal after the restart is the answer (no loop)', async () => {
    const handler = new AmazonHandler(endpoints, new TokenCache());
    quotaOnPage2();
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 400, times: 2 });
    const call = items();
    failure(await handler.execute(call));
    expect(failure(await handler.execute({ ...call, attempt: 1 }))).toMatchObject({ kind: 'rejected', vendorStatus: 400 });
    expect(pageRequests()).toHaveLength(4);
  });
});

describe('AmazonHandler getOrderItems with a NextToken no URL can carry', () => {
  it('a NextToken with a lone surrogate (JSON "\\ud800") is a bad_response outcome, not a thrown URIError; nothing more is asked', async () => {
    const page = `{"payload":{"AmazonOrderId":"${AMAZON_ORDER_IDS.paged}","OrderItems":[{"ASIN":"B0X","OrderItemId":"1","QuantityOrdered":1}],"NextToken":"abc\\ud800"}}`;
    emu.fault({ vendor: 'amazon', path: itemsPath, kind: 'status', status: 200, body: page });
    const call = ctx('get_order_items', { orderId: AMAZON_ORDER_IDS.paged });
    expect(failure(await new AmazonHandler(endpoints, new TokenCache()).execute(call))).toMatchObject({ kind: 'bad_response', vendorStatus: 200 });
    expect(emu.count({ path: itemsPath })).toBe(1);
    expect(call.scratch.size).toBe(0);
  });
});
