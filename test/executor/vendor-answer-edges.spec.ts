/**
 * Vendor handlers against the emulator over real HTTP, on answers at the edges of VENDORS.md: Shopify's deprecation
 * header (§1.6), THROTTLED without cost extensions and an empty errors list (§1.4-1.5), and vendor error bodies that
 * echo the caller's secrets (§1.4, §2.3, §3.3, §4.2), which must never reach an outcome (the ledger's error text).
 */
import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { AMAZON_EMULATOR_CREDENTIALS, AmazonEmulator } from '../../src/emulator/amazon.emulator.js';
import { AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import { JUMIO_EMULATOR_CREDENTIALS, JUMIO_EXECUTION_IDS, JumioEmulator } from '../../src/emulator/jumio.emulator.js';
import { NANGO_EMULATOR_CREDENTIALS, NangoEmulator } from '../../src/emulator/nango.emulator.js';
import { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
import { SHOPIFY_EMULATOR_TOKEN } from '../../src/emulator/shopify.fixtures.js';
import { VendorEmulator } from '../../src/emulator/vendor-emulator.js';
import { AmazonHandler } from '../../src/vendors/amazon/amazon.handler.js';
import { TokenCache } from '../../src/vendors/auth/token-cache.js';
import { callContext, emulatorEndpoints, failure } from '../../src/vendors/handler.spec-support.js';
import { JumioHandler } from '../../src/vendors/jumio/jumio.handler.js';
import { NangoHandler } from '../../src/vendors/nango/nango.handler.js';
import { ShopifyHandler } from '../../src/vendors/shopify/shopify.handler.js';

const emu = new VendorEmulator([new ShopifyEmulator(), new AmazonEmulator(), new JumioEmulator(), new NangoEmulator()]);
let url: string;

beforeAll(async () => {
  url = await emu.start();
});
afterAll(() => emu.stop());
beforeEach(() => emu.reset());

const shopifyLookup = () =>
  callContext({
    toolCallId: randomUUID(),
    idempotencyKey: randomUUID(),
    toolName: 'order_lookup',
    action: 'lookup',
    params: { orderId: '12345' },
    credentials: { shopDomain: 'demo-shop.myshopify.com', accessToken: SHOPIFY_EMULATOR_TOKEN },
  });

const okOrder = {
  data: { order: { id: 'gid://shopify/Order/12345', name: '#1042', displayFinancialStatus: 'PAID', displayFulfillmentStatus: 'FULFILLED' } },
  extensions: { cost: { requestedQueryCost: 12, actualQueryCost: 12, throttleStatus: { maximumAvailable: 2000, currentlyAvailable: 1988, restoreRate: 100 } } },
};

describe('Shopify (VENDORS.md §1.4-1.6)', () => {
  it('logs X-Shopify-API-Deprecated-Reason (§1.6: "log X-Shopify-API-Version and X-Shopify-API-Deprecated-Reason")', async () => {
    const warn = vi.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const h = new ShopifyHandler(emulatorEndpoints(url));
      emu.fault({ vendor: 'shopify', kind: 'status', status: 200, body: okOrder, headers: { 'x-shopify-api-version': '2026-07', 'x-shopify-api-deprecated-reason': 'https://shopify.dev/api/usage/versioning#deprecation-practices' } });
      const out = await h.execute(shopifyLookup());
      expect(out.ok).toBe(true);
      const reason = 'https://shopify.dev/api/usage/versioning#deprecation-practices';
      expect(warn).toHaveBeenCalledWith(expect.objectContaining({ reason: 'https://shopify.dev/api/usage/versioning' }), expect.stringContaining('X-Shopify-API-Deprecated-Reason'));
      // Once per version and reason; a reason that is no shopify.dev address is not logged as it is.
      warn.mockClear();
      emu.fault({ vendor: 'shopify', kind: 'status', status: 200, body: okOrder, headers: { 'x-shopify-api-deprecated-reason': `${reason}?v=2` } });
      expect((await h.execute(shopifyLookup())).ok).toBe(true);
      expect(warn).not.toHaveBeenCalled(); // the same page: noticed once
      emu.fault({ vendor: 'shopify', kind: 'status', status: 200, body: okOrder, headers: { 'x-shopify-api-deprecated-reason': 'see shpat_notareason0123456789' } });
      expect((await h.execute(shopifyLookup())).ok).toBe(true);
      expect(JSON.stringify(warn.mock.calls)).not.toContain('shpat_');
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      warn.mockRestore();
    }
  });

  it('logs the 2025-04+ reason, a list of schema fields ("Shop.products, Shop.productVariants"): which ones, once per set in any order, a new set noticed again', async () => {
    const warn = vi.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const notice = async (reason: string) => {
      emu.fault({ vendor: 'shopify', kind: 'status', status: 200, body: okOrder, headers: { 'x-shopify-api-version': '2026-07', 'x-shopify-api-deprecated-reason': reason } });
      expect((await h.execute(shopifyLookup())).ok).toBe(true);
    };
    const h = new ShopifyHandler(emulatorEndpoints(url));
    try {
      await notice('Order.email, Order.phone');
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn).toHaveBeenCalledWith(expect.objectContaining({ requested: '2026-07', reason: 'Order.email, Order.phone' }), expect.stringContaining('X-Shopify-API-Deprecated-Reason'));
      await notice('Order.phone,Order.email,Order.phone'); // the same set
      expect(warn).toHaveBeenCalledTimes(1);
      await notice('ProductVariant.inventoryQuantity');
      expect(warn).toHaveBeenCalledTimes(2);
      expect(warn).toHaveBeenLastCalledWith(expect.objectContaining({ reason: 'ProductVariant.inventoryQuantity' }), expect.any(String));
      // Free text, or a list with anything but identifiers in it, is not logged as sent.
      await notice('Order.email, see shpat_notareason0123456789');
      await notice('Order.email; DROP');
      expect(warn).toHaveBeenCalledTimes(3);
      expect(JSON.stringify(warn.mock.calls)).not.toMatch(/shpat_|DROP/);
    } finally {
      warn.mockRestore();
    }
  });

  it('GraphQL THROTTLED whose answer carries no cost extensions waits like a 429 that names no wait (1 s), not a bare 100 ms jitter', async () => {
    const h = new ShopifyHandler(emulatorEndpoints(url));
    emu.fault({ vendor: 'shopify', kind: 'status', status: 200, body: { errors: [{ message: 'Throttled', extensions: { code: 'THROTTLED' } }] } });
    const f = failure(await h.execute(shopifyLookup()));
    expect(f.kind).toBe('rate_limited');
    // Not the executor's bare jitter, and not reported to the agent as a wait the vendor named.
    expect(f.retryAfterMs).toBe(1000);
    expect(f.retryAfterIsDefault).toBe(true);
  });

  it('a read answered 200 with data and an empty errors array is a success', async () => {
    const h = new ShopifyHandler(emulatorEndpoints(url));
    emu.fault({ vendor: 'shopify', kind: 'status', status: 200, body: { ...okOrder, errors: [] } });
    const out = await h.execute(shopifyLookup());
    expect(out.ok).toBe(true);
  });

  it('a 401 body that echoes the access token never reaches the outcome message', async () => {
    const h = new ShopifyHandler(emulatorEndpoints(url));
    const token = 'shpat_echoedsecret0123456789abcdef';
    emu.fault({ vendor: 'shopify', kind: 'status', status: 401, body: { errors: `[API] Invalid API key or access token ${token}` } });
    const f = failure(await h.execute({ ...shopifyLookup(), credentials: { shopDomain: 'demo-shop.myshopify.com', accessToken: token } }));
    expect(f.kind).toBe('auth');
    expect(JSON.stringify(f)).not.toContain(token);
    expect(JSON.stringify(f)).not.toContain('echoedsecret');
  });
});

describe('secrets echoed by vendor error bodies (LWA, Jumio, Nango)', () => {
  it('LWA 400 whose error_description echoes the client secret and refresh token', async () => {
    const h = new AmazonHandler(emulatorEndpoints(url), new TokenCache());
    const c = AMAZON_EMULATOR_CREDENTIALS;
    emu.fault({ vendor: 'amazon', path: /\/auth\/o2\/token/, kind: 'status', status: 400, body: { error: 'invalid_grant', error_description: `bad ${c.refreshToken} for ${c.clientSecret}` } });
    const f = failure(await h.execute(callContext({ toolName: 'amazon_query', action: 'get_order', params: { orderId: AMAZON_ORDER_IDS.shipped }, credentials: { ...c, region: 'na' } })));
    expect(f).toMatchObject({ kind: 'auth', requestSent: false });
    expect(JSON.stringify(f)).not.toContain(c.clientSecret);
    expect(JSON.stringify(f)).not.toContain(c.refreshToken);
  });

  it('SP-API 403 whose details echo the access token', async () => {
    const h = new AmazonHandler(emulatorEndpoints(url), new TokenCache());
    const c = AMAZON_EMULATOR_CREDENTIALS;
    emu.fault({ vendor: 'amazon', path: /^\/orders\//, kind: 'status', status: 403, times: 2, body: { errors: [{ code: 'Unauthorized', message: 'Access to requested resource is denied.', details: 'token Atza|echoed-0001 has expired' }] } });
    const f = failure(await h.execute(callContext({ toolName: 'amazon_query', action: 'get_order', params: { orderId: AMAZON_ORDER_IDS.shipped }, credentials: { ...c, region: 'na' } })));
    expect(f.kind).toBe('auth');
    expect(JSON.stringify(f)).not.toContain('Atza|');
  });

  it('Jumio 401 whose body echoes the bearer token', async () => {
    const h = new JumioHandler(emulatorEndpoints(url), new TokenCache());
    emu.fault({ vendor: 'jumio', path: /\/status$/, kind: 'status', status: 401, times: 2, body: { title: 'Unauthorized', status: 401, detail: 'Bearer eyJhbGciOiJSUzI1NiJ9.echoed.sig is invalid' } });
    const f = failure(await h.execute(callContext({ toolName: 'kyc', action: 'get_status', params: { workflowExecutionId: JUMIO_EXECUTION_IDS.processed }, credentials: { ...JUMIO_EMULATOR_CREDENTIALS, region: 'amer-1' } })));
    expect(f.kind).toBe('auth');
    expect(JSON.stringify(f)).not.toContain('eyJ');
  });

  it('Nango 400 whose body echoes the Authorization header (secret key)', async () => {
    const h = new NangoHandler(emulatorEndpoints(url));
    const key = NANGO_EMULATOR_CREDENTIALS.secretKey;
    emu.fault({ vendor: 'nango', kind: 'status', status: 400, body: { error: { code: 'invalid_headers', message: `Authorization: Bearer ${key}`, errors: [{ code: 'x', message: key, path: ['authorization'] }] } } });
    const f = failure(await h.execute(callContext({ toolName: 'nango_proxy', action: 'get', params: { path: '/v1/x' }, credentials: { ...NANGO_EMULATOR_CREDENTIALS } })));
    expect(f.kind).toBe('auth');
    expect(JSON.stringify(f)).not.toContain(key);
  });

  it('Nango error code made of a secret-looking lower-case word is echoed into the message only when it is a base_url_override* code', async () => {
    const h = new NangoHandler(emulatorEndpoints(url));
    emu.fault({ vendor: 'nango', kind: 'status', status: 400, body: { error: { code: 'base_url_override_secretsauce' } } });
    const f = failure(await h.execute(callContext({ toolName: 'nango_proxy', action: 'get', params: { path: '/v1/x' }, credentials: { ...NANGO_EMULATOR_CREDENTIALS } })));
    // The code's text reaches the message, but only letters and underscores: no token, secret or key has that form.
    expect(f.message).toContain('base_url_override_secretsauce');
  });
});
