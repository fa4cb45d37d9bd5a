import { randomUUID } from 'node:crypto';
import { Ajv } from 'ajv';
import { Logger } from '@nestjs/common';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { ShopifyEmulator } from '../../emulator/shopify.emulator.js';
import { SHOPIFY_EMULATOR_CLIENT_ID, SHOPIFY_EMULATOR_CLIENT_SECRET, SHOPIFY_EMULATOR_TOKEN } from '../../emulator/shopify.fixtures.js';
import { VendorEmulator } from '../../emulator/vendor-emulator.js';
import type { VendorCallContext, VendorEndpoints } from '../vendor-handler.js';
import { callContext, emulatorEndpoints, failure } from '../handler.spec-support.js';
import { deprecationNamed, ShopifyHandler } from './shopify.handler.js';
import { refundIdempotencyKey } from './shopify.refund.js';
import { SHOPIFY_TOOLS } from './shopify.tools.js';

const emu = new VendorEmulator([new ShopifyEmulator()]);
const shop = (): ShopifyEmulator => emu.vendor<ShopifyEmulator>('shopify');

function endpoints(overrides: Partial<VendorEndpoints> = {}): VendorEndpoints {
  return emulatorEndpoints(emu.url, { timeoutMs: 2_000, connectTimeoutMs: 1_000, ...overrides });
}

function ctx(toolName: string, action: string, params: Record<string, unknown>, extra: Partial<VendorCallContext> = {}): VendorCallContext {
  return callContext({
    toolCallId: randomUUID(),
    idempotencyKey: `run-1:${randomUUID()}`,
    toolName,
    action,
    params,
    credentials: { shopDomain: 'demo-shop.myshopify.com', accessToken: SHOPIFY_EMULATOR_TOKEN },
    ...extra,
  });
}

const lookup = (orderId: string, extra: Partial<VendorCallContext> = {}): VendorCallContext => ctx('order_lookup', 'lookup', { orderId }, extra);
const refund = (params: Record<string, unknown>, extra: Partial<VendorCallContext> = {}): VendorCallContext =>
  ctx('shopify_refund', 'create', params, extra);

let handler: ShopifyHandler;

beforeAll(async () => {
  await emu.start();
  handler = new ShopifyHandler(endpoints());
});
afterAll(() => emu.stop());
beforeEach(() => emu.reset());

describe('ShopifyHandler reads', () => {
  it('looks up an order and normalises it', async () => {
    const out = await handler.execute(lookup('12345'));
    expect(out).toMatchObject({ ok: true, vendorStatus: 200 });
    const data = (out as { data: Record<string, unknown> }).data;
    expect(data).toMatchObject({
      orderId: '12345',
      name: '#1042',
      status: 'fulfilled',
      financialStatus: 'paid',
      trackingNumber: 'TRACK-001',
      trackingNumbers: ['TRACK-001'],
      // Carrier and tracking page (fetched, and once dropped), the amounts a refund is sized by, the note add_note replaces.
      tracking: [{ number: 'TRACK-001', company: 'UPS', url: 'https://www.ups.com/track?tracknum=TRACK-001' }],
      totalPrice: '120.00',
      totalRefunded: '0.00',
      note: null,
      customer: { email: 'jane.doe@example.com', phone: '+14155550123' },
      shippingAddress: { zip: '94107', city: 'San Francisco', countryCode: 'US' },
    });
    expect(data.items).toEqual([
      { name: 'Aurora Trail Running Shoe - 9 / Blue', quantity: 1, unitPrice: '90.00' },
      { name: 'Merino Running Socks - M', quantity: 2, unitPrice: '15.00' },
    ]);
    const [req] = emu.requests;
    expect(req.path).toBe('/admin/api/2026-07/graphql.json');
    expect(req.headers['x-shopify-access-token']).toBe(SHOPIFY_EMULATOR_TOKEN);
    expect(JSON.parse(req.body).variables).toEqual({ id: 'gid://shopify/Order/12345' });
  });

  it('uses the apiVersion of the credentials when given', async () => {
    const out = await handler.execute(lookup('450789469', { credentials: { shopDomain: 'demo-shop.myshopify.com', accessToken: SHOPIFY_EMULATOR_TOKEN, apiVersion: '2026-04' } }));
    expect(out.ok).toBe(true);
    expect(emu.requests[0].path).toBe('/admin/api/2026-04/graphql.json');
  });

  it('refuses an answer about another order or product than the one asked for (a proxy or cache mixing answers up)', async () => {
    emu.fault({ vendor: 'shopify', bodyMatch: /OrderLookup/, kind: 'status', status: 200, body: { data: { order: { id: 'gid://shopify/Order/450789469', name: '#1001', email: 'someone.else@example.com' } } } });
    const out = await handler.execute(lookup('12345'));
    expect(failure(out)).toMatchObject({ kind: 'bad_response', requestSent: true, message: 'shopify answered with another order than the one asked for' });
    expect(JSON.stringify(out)).not.toContain('someone.else');
    emu.reset();
    emu.fault({ vendor: 'shopify', bodyMatch: /ProductLookup/, kind: 'status', status: 200, body: { data: { product: { id: 'gid://shopify/Product/1', title: 'Other' } } } });
    expect(failure(await handler.execute(ctx('shopify_query', 'get_product', { productId: '632910392' })))).toMatchObject({ kind: 'bad_response', message: 'shopify answered with another product than the one asked for' });
    emu.reset();
    // the order asked for, as ever
    expect(await handler.execute(lookup('12345'))).toMatchObject({ ok: true, data: { orderId: '12345' } });
  });

  it('maps an unknown order (data.order null) to not_found', async () => {
    expect(failure(await handler.execute(lookup('999999')))).toMatchObject({ kind: 'not_found', requestSent: true });
  });

  it('gets a product, and not_found for an unknown one', async () => {
    const out = await handler.execute(ctx('shopify_query', 'get_product', { productId: '632910392' }));
    expect(out).toMatchObject({ ok: true, data: { productId: '632910392', title: 'Aurora Trail Running Shoe', status: 'active' } });
    expect(failure(await handler.execute(ctx('shopify_query', 'get_product', { productId: '1' }))).kind).toBe('not_found');
  });

  it('maps a bad token to auth without leaking it', async () => {
    const out = failure(await handler.execute(lookup('12345', { credentials: { shopDomain: 'demo-shop.myshopify.com', accessToken: 'shpat_wrong_secret_9' } })));
    expect(out).toMatchObject({ kind: 'auth', vendorStatus: 401, requestSent: true });
    expect(out.message).not.toContain('shpat_wrong');
    expect(out.message).not.toContain('Invalid API key');
  });

  it('refuses a shop domain that is not *.myshopify.com before sending anything', async () => {
    const h = new ShopifyHandler(endpoints({ shopifyBaseUrl: undefined }));
    const out = failure(await h.execute(lookup('12345', { credentials: { shopDomain: 'evil.example.com/x?', accessToken: SHOPIFY_EMULATOR_TOKEN } })));
    expect(out).toMatchObject({ kind: 'auth', requestSent: false });
    // One spelling per shop: the order's refund lease is keyed on it.
    for (const shopDomain of ['Acme.myshopify.com', 'acme.myshopify.com.', 'https://acme.myshopify.com', ' acme.myshopify.com']) {
      expect(failure(await h.execute(lookup('12345', { credentials: { shopDomain, accessToken: SHOPIFY_EMULATOR_TOKEN } }))), shopDomain).toMatchObject({ kind: 'auth' });
    }
    expect(emu.requests).toHaveLength(0);
  });

  it('maps 429 to rate_limited with Retry-After in seconds', async () => {
    emu.fault({ vendor: 'shopify', kind: 'status', status: 429 });
    expect(failure(await handler.execute(lookup('12345')))).toMatchObject({ kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 2000 });
  });

  it('a 429 without Retry-After: the cost maths of a THROTTLED body, else Shopify client default of 1 s', async () => {
    const throttled = {
      errors: [{ message: 'Throttled', extensions: { code: 'THROTTLED' } }],
      extensions: { cost: { requestedQueryCost: 500, actualQueryCost: null, throttleStatus: { maximumAvailable: 2000, currentlyAvailable: 0, restoreRate: 100 } } },
    };
    emu.fault({ vendor: 'shopify', kind: 'status', status: 429, body: throttled, headers: {} });
    expect(failure(await handler.execute(lookup('12345')))).toMatchObject({ kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 5000 });
    emu.fault({ vendor: 'shopify', kind: 'status', status: 429, body: '<html>Too Many Requests</html>', headers: {} });
    expect(failure(await handler.execute(lookup('12345')))).toMatchObject({ kind: 'rate_limited', vendorStatus: 429, retryAfterMs: 1000 });
  });

  it('maps GraphQL THROTTLED to rate_limited with the cost maths', async () => {
    emu.fault({ vendor: 'shopify', kind: 'throttled' });
    // requestedQueryCost 12 of an order query, 0 available, restoring 100/s → 120 ms
    expect(failure(await handler.execute(lookup('12345')))).toMatchObject({ kind: 'rate_limited', vendorStatus: 200, retryAfterMs: 120 });
  });

  it('maps a non-JSON 500 to server_error', async () => {
    emu.fault({ vendor: 'shopify', kind: 'status', status: 500, body: '<html><body>Internal error</body></html>' });
    expect(failure(await handler.execute(lookup('12345')))).toMatchObject({ kind: 'server_error', vendorStatus: 500 });
    emu.fault({ vendor: 'shopify', kind: 'status', status: 503 });
    expect(failure(await handler.execute(lookup('12345')))).toMatchObject({ kind: 'server_error', vendorStatus: 503 });
  });

  it('maps a malformed 200 to bad_response', async () => {
    emu.fault({ vendor: 'shopify', kind: 'malformed' });
    expect(failure(await handler.execute(lookup('12345')))).toMatchObject({ kind: 'bad_response', requestSent: true });
  });

  it('maps a body over the cap to too_large', async () => {
    const small = new ShopifyHandler(endpoints({ maxResponseBytes: 64 * 1024 }));
    emu.fault({ vendor: 'shopify', kind: 'huge' });
    expect(failure(await small.execute(lookup('12345')))).toMatchObject({ kind: 'too_large', requestSent: true });
  });

  it('times out a hung vendor with requestSent true', async () => {
    // Hung for far longer than the bound: a timeout that did not fire is told apart from a loaded machine by
    // seconds (the emulator's timer ends when it stops).
    const quick = new ShopifyHandler(endpoints({ timeoutMs: 200 }));
    emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 10_000 });
    const started = Date.now();
    expect(failure(await quick.execute(lookup('12345')))).toMatchObject({ kind: 'timeout', requestSent: true });
    expect(Date.now() - started).toBeLessThan(200 + 3_000);
  });
});

describe('ShopifyHandler writes', () => {
  it('sets the order note to the final text, the same on a resend', async () => {
    const call = ctx('shopify_order', 'add_note', { orderId: '12345', note: 'Customer asked for gift wrap' });
    expect(await handler.execute(call)).toMatchObject({ ok: true, data: { orderId: '12345', note: 'Customer asked for gift wrap' } });
    expect(await handler.execute({ ...call, attempt: 1 })).toMatchObject({ ok: true });
    expect(shop().order(12345)?.note).toBe('Customer asked for gift wrap');
    expect(failure(await handler.execute(ctx('shopify_order', 'add_note', { orderId: '999999', note: 'x' }))).kind).toBe('not_found');
  });

  it('a note refused because something other than the order is missing is a refusal, not "order not found"', async () => {
    const refusedWith = (userErrors: unknown[]) =>
      emu.fault({ vendor: 'shopify', bodyMatch: /orderUpdate/, kind: 'status', status: 200, body: { data: { orderUpdate: { order: null, userErrors } } } });
    const note = () => handler.execute(ctx('shopify_order', 'add_note', { orderId: '12345', note: 'x' }));
    refusedWith([{ field: ['metafields', '0', 'namespace'], message: 'Metafield definition not found' }]);
    expect(failure(await note())).toMatchObject({ kind: 'rejected' });
    refusedWith([{ message: 'Staff member not found' }]);
    expect(failure(await note())).toMatchObject({ kind: 'rejected' });
    // the order itself: by its field, or by a message about it
    refusedWith([{ field: ['id'], message: 'Order does not exist' }]);
    expect(failure(await note())).toMatchObject({ kind: 'not_found' });
    refusedWith([{ message: 'Order not found' }]);
    expect(failure(await note())).toMatchObject({ kind: 'not_found' });
  });

  it('refunds once even when the same call is sent twice', async () => {
    const call = refund({ orderId: '12345', amount: '20', note: 'Damaged box' });
    const first = await handler.execute(call);
    const second = await handler.execute({ ...call, attempt: 1 });
    expect(first).toMatchObject({ ok: true, data: { orderId: '12345', amount: '20.00', currency: 'USD', status: 'success' } });
    expect(second).toEqual(first);
    expect(shop().refundCount(12345)).toBe(1);
    const stored = shop().order(12345)?.refunds[0];
    expect(stored?.note).toBe(`Damaged box [tool-gateway call ${call.toolCallId}]`);
    const mutation = emu.requests.find((r) => r.body.includes('refundCreate'));
    expect(mutation?.body).toContain(`@idempotent(key: \\"${refundIdempotencyKey('org-1', call.idempotencyKey)}\\")`);
  });

  it('refunds a multi-currency order in the currency the customer paid in, naming it (VENDORS.md §1.8)', async () => {
    const call = refund({ orderId: '1004', amount: '10', currency: 'EUR' });
    const out = await handler.execute(call);
    expect(out).toMatchObject({ ok: true, data: { orderId: '1004', amount: '10.00', currency: 'EUR', status: 'success' } });
    expect(shop().refundCount(1004)).toBe(1);
    const mutation = emu.requests.find((r) => r.body.includes('refundCreate'));
    expect(JSON.parse(mutation?.body ?? '{}')).toMatchObject({ variables: { input: { currency: 'EUR', transactions: [{ amount: '10.00' }] } } });
    // the retry sends the same input: Shopify replays the refund instead of refusing the key
    expect(await handler.execute({ ...call, attempt: 1 })).toEqual(out);
    expect(shop().refundCount(1004)).toBe(1);
  });

  it('refuses, before the mutation, a refund whose currency is not the one the customer paid in, or left unsaid when that is not the shop’s', async () => {
    const cases: [params: Record<string, unknown>, message: string][] = [
      [{ orderId: '1004', amount: '10' }, 'the customer paid in EUR, not the shop\'s USD: give currency "EUR" to refund in it'],
      [{ orderId: '1004', amount: '10', currency: 'USD' }, 'the customer paid in EUR: the refund amount must be in EUR (currency "EUR")'],
      [{ orderId: '12345', amount: '10', currency: 'EUR' }, 'the customer paid in USD: the refund amount must be in USD (currency "USD")'],
    ];
    for (const [params, message] of cases) {
      expect(failure(await handler.execute(refund(params)))).toMatchObject({ kind: 'rejected', requestSent: false, message });
    }
    expect(emu.requests.some((r) => r.body.includes('refundCreate'))).toBe(false);
    // an order whose currency Shopify does not give: a named currency cannot be checked, so it is refused
    emu.fault({
      vendor: 'shopify',
      bodyMatch: /RefundContext/,
      kind: 'status',
      status: 200,
      body: { data: { order: { id: 'gid://shopify/Order/12345', transactions: [{ id: 'gid://shopify/OrderTransaction/71001', kind: 'SALE', status: 'SUCCESS', gateway: 'shopify_payments' }] } } },
    });
    expect(failure(await handler.execute(refund({ orderId: '12345', amount: '10', currency: 'KWD' })))).toMatchObject({ kind: 'rejected', requestSent: false });
    expect(emu.requests.some((r) => r.body.includes('refundCreate'))).toBe(false);
    // the shop's own currency, said or not, is fine
    expect(await handler.execute(refund({ orderId: '12345', amount: '1', currency: 'USD' }))).toMatchObject({ ok: true, data: { currency: 'USD' } });
    expect(shop().refundCount(1004)).toBe(0);
  });

  it('makes a second refund for a different ledger key', async () => {
    await handler.execute(refund({ orderId: '12345', amount: '20' }));
    await handler.execute(refund({ orderId: '12345', amount: '20' }));
    expect(shop().refundCount(12345)).toBe(2);
  });

  it('rejects a refund over what is still refundable', async () => {
    const out = failure(await handler.execute(refund({ orderId: '1002', amount: '60.01' })));
    expect(out).toMatchObject({ kind: 'rejected', requestSent: true });
    expect(out.message).toBe('refund amount is more than is still refundable on the order');
    expect(shop().refundCount(1002)).toBe(1); // the seeded one only
  });

  describe('split tender: the payment a refund goes back to is one that can still take it (order 1005: gift card 10.00, then card 35.00)', () => {
    const parentsOf = (orderId: number) => shop().order(orderId)!.transactions.filter((t) => t.kind === 'REFUND').map((t) => [t.parentId, t.gateway, t.amountCents]);
    const refundInputs = () => emu.requests.filter((r) => r.body.includes('refundCreate')).map((r) => (JSON.parse(r.body) as { variables: unknown }).variables);

    it('after 30.00 went back to the card (5.00 left on it), a 10.00 refund goes to the gift card instead of being refused', async () => {
      expect(await handler.execute(refund({ orderId: '1005', amount: '30.00' }))).toMatchObject({ ok: true });
      expect(await handler.execute(refund({ orderId: '1005', amount: '10.00' }))).toMatchObject({ ok: true, data: { amount: '10.00', status: 'success' } });
      expect(parentsOf(1005)).toEqual([[71061, 'shopify_payments', 3_000], [71060, 'gift_card', 1_000]]);
    });

    it('the payment picked on the first attempt is kept for the call\'s retries: after an applied-but-unanswered attempt the retry sends the same input and Shopify replays it', async () => {
      expect(await handler.execute(refund({ orderId: '1005', amount: '30.00' }))).toMatchObject({ ok: true });
      const call = refund({ orderId: '1005', amount: '10.00' });
      emu.fault({ vendor: 'shopify', kind: 'reset_after', bodyMatch: /refundCreate/ });
      expect(failure(await handler.execute(call))).toMatchObject({ kind: 'network', requestSent: true });
      // The gift card now has nothing left: picking again would move the retry to the card, and Shopify would refuse
      // the key with other parameters (an unknown outcome) instead of handing back the refund it made.
      const retry = await handler.execute({ ...call, attempt: 1 });
      expect(retry).toMatchObject({ ok: true, data: { amount: '10.00', status: 'success' } });
      expect(shop().refundCount(1005)).toBe(2);
      const [, first, second] = refundInputs();
      expect(second).toEqual(first);
      expect(parentsOf(1005)).toEqual([[71061, 'shopify_payments', 3_000], [71060, 'gift_card', 1_000]]);
    });
  });

  it('reports requestSent on a reset after the refund was applied, and the retry replays it', async () => {
    const call = refund({ orderId: '450789469', amount: '10.50' });
    emu.fault({ vendor: 'shopify', kind: 'reset_after', bodyMatch: /refundCreate/ });
    expect(failure(await handler.execute(call))).toMatchObject({ kind: 'network', requestSent: true });
    expect(shop().refundCount(450789469)).toBe(1);
    const retry = await handler.execute({ ...call, attempt: 1 });
    expect(retry).toMatchObject({ ok: true, data: { amount: '10.50' } });
    expect(shop().refundCount(450789469)).toBe(1);
  });

  it('reports requestSent false when the read before the refund fails', async () => {
    emu.fault({ vendor: 'shopify', kind: 'reset_before', bodyMatch: /RefundContext/ });
    expect(failure(await handler.execute(refund({ orderId: '12345', amount: '5' })))).toMatchObject({ kind: 'network', requestSent: false });
    expect(emu.count({ vendor: 'shopify', applied: true })).toBe(0);
  });

  describe('amounts in the decimals of the currency the customer paid in (ISO 4217 minor unit)', () => {
    // The gateway checks the params against the catalog's schema before the handler runs (tool-catalog.service.ts).
    const schemaAccepts = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true }).compile(
      SHOPIFY_TOOLS.find((t) => t.name === 'shopify_refund')!.actions.find((a) => a.name === 'create')!.inputSchema,
    );
    const refundCreates = () => emu.requests.filter((r) => r.body.includes('refundCreate'));
    const sentAmounts = () => refundCreates().map((r) => (JSON.parse(r.body) as { variables: { input: { transactions: Array<{ amount: string }> } } }).variables.input.transactions[0].amount);

    it('refunds 12.345 KWD exactly (3 decimals), and the retry sends the same input', async () => {
      const call = refund({ orderId: '1006', amount: '12.345', currency: 'KWD' });
      expect(schemaAccepts(call.params)).toBe(true);
      const first = await handler.execute(call);
      expect(first).toMatchObject({ ok: true, data: { orderId: '1006', amount: '12.345', currency: 'KWD', status: 'success' } });
      expect(shop().order(1006)?.refunds.map((r) => r.amountCents)).toEqual([12_345]); // fils: exactly 12.345
      expect(await handler.execute({ ...call, attempt: 1 })).toEqual(first);
      expect(shop().refundCount(1006)).toBe(1);
      const [a, b] = refundCreates().map((r) => JSON.parse(r.body) as unknown);
      expect(b).toEqual(a);
      expect(sentAmounts()).toEqual(['12.345', '12.345']);
    });

    it('writes the amount sent with exactly the currency\'s decimals: one spelling per amount', async () => {
      const cases: [orderId: string, currency: string, amount: string, sent: string][] = [
        ['1006', 'KWD', '12.5', '12.500'],
        ['1007', 'JPY', '100', '100'],
        ['1007', 'JPY', '0100.00', '100'],
        ['12345', 'USD', '12.5', '12.50'],
        ['12345', 'USD', '12.340', '12.34'],
      ];
      for (const [orderId, currency, amount, sent] of cases) {
        emu.reset();
        expect(await handler.execute(refund({ orderId, amount, currency })), `${amount} ${currency}`).toMatchObject({ ok: true, data: { currency } });
        expect(sentAmounts(), `${amount} ${currency}`).toEqual([sent]);
      }
      expect(shop().order(12345)?.refunds.map((r) => r.amountCents)).toEqual([1_234]);
    });

    it('refuses, before the mutation, an amount with more decimals than the currency has', async () => {
      const cases: [params: Record<string, unknown>, message: string][] = [
        [{ orderId: '1007', amount: '100.5', currency: 'JPY' }, 'JPY has no decimals: the refund amount "100.5" must be a whole number'],
        [{ orderId: '1007', amount: '0.001', currency: 'JPY' }, 'JPY has no decimals: the refund amount "0.001" must be a whole number'],
        [{ orderId: '12345', amount: '12.345' }, 'USD has 2 decimals: the refund amount "12.345" has more'],
        [{ orderId: '1004', amount: '10.001', currency: 'EUR' }, 'EUR has 2 decimals: the refund amount "10.001" has more'],
      ];
      for (const [params, message] of cases) {
        expect(failure(await handler.execute(refund(params)))).toMatchObject({ kind: 'rejected', requestSent: false, message });
      }
      expect(refundCreates()).toHaveLength(0);
      // an order whose currency Shopify does not give: 2 decimals
      emu.fault({
        vendor: 'shopify',
        bodyMatch: /RefundContext/,
        kind: 'status',
        status: 200,
        body: { data: { order: { id: 'gid://shopify/Order/12345', transactions: [{ id: 'gid://shopify/OrderTransaction/71001', kind: 'SALE', status: 'SUCCESS', gateway: 'shopify_payments' }] } } },
      });
      expect(failure(await handler.execute(refund({ orderId: '12345', amount: '1.005' })))).toMatchObject({ kind: 'rejected', requestSent: false, message: expect.stringMatching(/2 decimals/) });
      expect(refundCreates()).toHaveLength(0);
      expect(shop().refundCount(1007) + shop().refundCount(12345) + shop().refundCount(1004)).toBe(0);
    });

    it('the schema takes up to 3 decimals, the most any currency has', () => {
      for (const amount of ['12.345', '100', '19.99', '0.5']) expect(schemaAccepts({ orderId: '1006', amount }), amount).toBe(true);
      for (const amount of ['12.3456', '1.', '.5', '1e3']) expect(schemaAccepts({ orderId: '1006', amount }), amount).toBe(false);
    });
  });

  it('refuses ids beyond Shopify\'s 64-bit ids before anything is sent: 20 digits by the schema, 19 above 2^63 − 1 by validate()', () => {
    const ajv = new Ajv({ strict: true, allowUnionTypes: true });
    const idParams: [tool: string, action: string, params: (id: string) => Record<string, unknown>][] = [
      ['order_lookup', 'lookup', (orderId) => ({ orderId })],
      ['shopify_query', 'get_product', (productId) => ({ productId })],
      ['shopify_order', 'add_note', (orderId) => ({ orderId, note: 'x' })],
      ['shopify_refund', 'create', (orderId) => ({ orderId, amount: '1.00' })],
    ];
    for (const [tool, action, params] of idParams) {
      const schemaAccepts = ajv.compile(SHOPIFY_TOOLS.find((t) => t.name === tool)!.actions.find((a) => a.name === action)!.inputSchema);
      // What the gateway does with a call: the schema, then validate() (tool-catalog.service.ts checkParams).
      const accepted = (id: string) => schemaAccepts(params(id)) && handler.validate(tool, action, params(id)) === null;
      expect(schemaAccepts(params('99999999999999999999')), `${tool} 20 digits`).toBe(false);
      for (const id of ['9223372036854775808', '9999999999999999999']) {
        expect(schemaAccepts(params(id)), `${tool} ${id}`).toBe(true);
        expect(handler.validate(tool, action, params(id)), `${tool} ${id}`).toBe(`${Object.keys(params(id))[0]}: must be at most 9223372036854775807 (Shopify ids are 64-bit)`);
      }
      for (const id of ['9223372036854775807', '1', '450789469']) expect(accepted(id), `${tool} ${id}`).toBe(true);
    }
  });

  it('refuses a refund of zero before sending, and the schema the model is given says so', () => {
    expect(handler.validate('shopify_refund', 'create', { orderId: '1', amount: '0.00' })).toBe('amount must be greater than 0');
    expect(handler.validate('shopify_refund', 'create', { orderId: '1', amount: '0.01' })).toBeNull();
    const amount = SHOPIFY_TOOLS.find((t) => t.name === 'shopify_refund')!.actions.find((a) => a.name === 'create')!.inputSchema.properties as Record<string, { description: string }>;
    expect(amount.amount.description).toMatch(/^Decimal amount, more than 0,/);
  });
});

describe('ShopifyHandler and API versions', () => {
  it('tells ops, once, when Shopify served another API version than the one requested (fall forward)', async () => {
    const warn = vi.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const own = new ShopifyHandler(endpoints());
      const old = { shopDomain: 'demo-shop.myshopify.com', accessToken: SHOPIFY_EMULATOR_TOKEN, apiVersion: '2024-01' };
      for (const id of ['12345', '1001']) expect(await own.execute(lookup(id, { credentials: old }))).toMatchObject({ ok: true });
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0][0]).toEqual({ requested: '2024-01', served: '2025-10' });
      // a supported version says nothing
      warn.mockClear();
      expect(await own.execute(lookup('12345'))).toMatchObject({ ok: true });
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });
});

describe('ShopifyHandler when Shopify refuses some fields to the app (ACCESS_DENIED on a path, VENDORS.md §1.4)', () => {
  it('an order lookup without read_customers answers the order, with the customer object named as unavailable', async () => {
    shop().revokeScope('read_customers');
    const out = await handler.execute(lookup('12345'));
    // The order's own email and phone (read_orders) still answer for the customer.
    expect(out).toMatchObject({
      ok: true,
      data: { orderId: '12345', status: 'fulfilled', trackingNumber: 'TRACK-001', customer: { email: 'jane.doe@example.com' }, unavailable: ['customer'] },
    });
    // a full answer says nothing of the kind
    emu.reset();
    expect((await handler.execute(lookup('12345'))) as { data: Record<string, unknown> }).not.toHaveProperty('data.unavailable');
  });

  it('a refund whose order payments were refused fails as auth before the mutation, not as "no payment to refund"', async () => {
    emu.fault({
      vendor: 'shopify',
      bodyMatch: /RefundContext/,
      kind: 'status',
      status: 200,
      body: {
        data: { order: { id: 'gid://shopify/Order/12345', currencyCode: 'USD', presentmentCurrencyCode: 'USD', transactions: null } },
        errors: [{ message: 'Access denied for transactions field.', path: ['order', 'transactions'], extensions: { code: 'ACCESS_DENIED' } }],
      },
    });
    const out = failure(await handler.execute(refund({ orderId: '12345', amount: '5' })));
    expect(out).toMatchObject({ kind: 'auth', requestSent: false });
    expect(out.message).toMatch(/ACCESS_DENIED/);
    expect(emu.requests.some((r) => r.body.includes('refundCreate'))).toBe(false);
  });

  it('a refused root field, or another error code, still fails the call', async () => {
    const answers = [
      { data: { order: null }, errors: [{ message: 'denied', path: ['order'], extensions: { code: 'ACCESS_DENIED' } }] },
      { data: { order: { id: 'x' } }, errors: [{ message: 'boom', path: ['order', 'customer'], extensions: { code: 'INTERNAL_SERVER_ERROR' } }] },
    ];
    for (const body of answers) {
      emu.fault({ vendor: 'shopify', path: /graphql\.json$/, kind: 'status', status: 200, body, times: 10 });
      expect((await handler.execute(lookup('12345'))).ok).toBe(false);
      emu.reset();
    }
  });
});

describe('ShopifyHandler with an app\'s client id and secret (client-credentials grant, VENDORS.md §1.1)', () => {
  const app = { shopDomain: 'demo-shop.myshopify.com', clientId: SHOPIFY_EMULATOR_CLIENT_ID, clientSecret: SHOPIFY_EMULATOR_CLIENT_SECRET };
  const tokenRequests = (): number => emu.count({ vendor: 'shopify', path: /^\/admin\/oauth\/access_token$/ });
  const graphqlRequests = (): number => emu.count({ vendor: 'shopify', path: /graphql\.json$/ });
  let appHandler: ShopifyHandler;
  beforeEach(() => {
    appHandler = new ShopifyHandler(endpoints()); // its own token cache
  });

  it('buys one token and reuses it for the calls that follow', async () => {
    for (const id of ['12345', '1001', '1002']) {
      expect(await appHandler.execute(lookup(id, { credentials: app }))).toMatchObject({ ok: true, data: { orderId: id } });
    }
    expect(tokenRequests()).toBe(1);
    const grant = emu.requests.find((r) => r.path === '/admin/oauth/access_token');
    expect(JSON.parse(grant?.body ?? '{}')).toEqual({ client_id: SHOPIFY_EMULATOR_CLIENT_ID, client_secret: SHOPIFY_EMULATOR_CLIENT_SECRET, grant_type: 'client_credentials' });
  });

  it('buys a token per shop, even where SHOPIFY_BASE_URL sends every shop to one address: a token is the shop\'s, not the app\'s', async () => {
    expect(await appHandler.execute(lookup('12345', { credentials: app }))).toMatchObject({ ok: true });
    expect(await appHandler.execute(lookup('12345', { credentials: { ...app, shopDomain: 'other-shop.myshopify.com' } }))).toMatchObject({ ok: true });
    expect(await appHandler.execute(lookup('1001', { credentials: app }))).toMatchObject({ ok: true });
    expect(tokenRequests()).toBe(2);
  });

  it('renews a token Shopify stopped accepting (401) once, and the call succeeds — a refund included, made once', async () => {
    expect(await appHandler.execute(lookup('12345', { credentials: app }))).toMatchObject({ ok: true });
    shop().expireGrantedTokens();
    expect(await appHandler.execute(lookup('1001', { credentials: app }))).toMatchObject({ ok: true, data: { orderId: '1001' } });
    expect(tokenRequests()).toBe(2);
    shop().expireGrantedTokens();
    const out = await appHandler.execute(refund({ orderId: '12345', amount: '5' }, { credentials: app }));
    expect(out).toMatchObject({ ok: true, data: { amount: '5.00', status: 'success' } });
    expect(shop().refundCount(12345)).toBe(1);
    expect(tokenRequests()).toBe(3);
  });

  it('a token refused right after it was issued is the credentials\' fault: no second token, no loop', async () => {
    emu.fault({ vendor: 'shopify', path: /graphql\.json$/, kind: 'status', status: 401, times: 5 });
    expect(failure(await appHandler.execute(lookup('12345', { credentials: app })))).toMatchObject({ kind: 'auth', vendorStatus: 401 });
    expect(tokenRequests()).toBe(1);
    expect(graphqlRequests()).toBe(1);
  });

  it('a wrong client secret is an auth failure before any Admin API request (nothing sent), and names no secret', async () => {
    const wrong = { ...app, clientSecret: 'shpss_00000000000000000000000000000000' };
    const out = failure(await appHandler.execute(refund({ orderId: '12345', amount: '5' }, { credentials: wrong })));
    expect(out).toMatchObject({ kind: 'auth', requestSent: false, vendorStatus: 400 });
    expect(out.message).not.toContain('shpss_');
    expect(graphqlRequests()).toBe(0);
    expect(shop().refundCount(12345)).toBe(0);
  });

  it('refresh-token credentials (a public app) need the shared token store: without one, an auth failure and no request', async () => {
    const out = failure(await appHandler.execute(lookup('12345', { credentials: { ...app, refreshToken: 'shprt_emulator_refresh_token_0001' } })));
    expect(out).toMatchObject({ kind: 'auth', requestSent: false });
    expect(out.message).not.toContain('shprt_');
    expect(emu.count({ vendor: 'shopify' })).toBe(0);
  });

  it('refuses credentials with neither a token nor a client id and secret, without a request', async () => {
    expect(failure(await appHandler.execute(lookup('12345', { credentials: { shopDomain: 'demo-shop.myshopify.com', clientId: SHOPIFY_EMULATOR_CLIENT_ID } })))).toMatchObject({
      kind: 'auth',
      message: 'shopify credentials: clientSecret is missing or malformed',
    });
    expect(emu.count({ vendor: 'shopify' })).toBe(0);
  });
});

describe('deprecationNamed: what of X-Shopify-API-Deprecated-Reason may be logged', () => {
  it("a shopify.dev page without its query; a list of schema coordinates sorted, without repeats, the first 20 of it and a count; nothing else as sent", () => {
    expect(deprecationNamed('https://shopify.dev/api/usage/versioning?x=1#y')).toBe('https://shopify.dev/api/usage/versioning');
    expect(deprecationNamed(' Shop.productVariants ,Shop.products,Shop.products')).toBe('Shop.productVariants, Shop.products');
    expect(deprecationNamed('Mutation.refundCreate.input')).toBe('Mutation.refundCreate.input');
    const many = Array.from({ length: 25 }, (_, i) => `T${String(i).padStart(2, '0')}.f`).join(',');
    expect(deprecationNamed(many)).toBe(`${Array.from({ length: 20 }, (_, i) => `T${String(i).padStart(2, '0')}.f`).join(', ')} (+5 more)`);
    for (const text of ['Order', 'Order.email, ', 'Order.email extra', 'Order.a.b.c', 'http://shopify.dev/x', `${'A'.repeat(65)}.f`, 'Order.émail']) {
      expect(deprecationNamed(text), text).toMatch(/^\(neither .* not logged\)$/);
    }
  });
});
