import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { vendorRequest } from '../vendors/http/vendor-http.js';
import { ShopifyEmulator } from './shopify.emulator.js';
import { SHOPIFY_EMULATOR_CLIENT_ID, SHOPIFY_EMULATOR_CLIENT_SECRET, SHOPIFY_EMULATOR_TOKEN, SHOPIFY_LONG_ORDER, SHOPIFY_MANY_VARIANTS_PRODUCT } from './shopify.fixtures.js';
import { VendorEmulator } from './vendor-emulator.js';

const shop = new ShopifyEmulator();
const emu = new VendorEmulator([shop]);

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Record<string, unknown>;
  text: string;
}

async function gql(query: string, variables: Record<string, unknown> = {}, opts: { version?: string; token?: string } = {}): Promise<Answer> {
  const res = await vendorRequest({
    method: 'POST',
    url: `${emu.url}/admin/api/${opts.version ?? '2026-07'}/graphql.json`,
    headers: { 'content-type': 'application/json', 'x-shopify-access-token': opts.token ?? shop.accessToken },
    body: JSON.stringify({ query, variables }),
    timeoutMs: 2_000,
    connectTimeoutMs: 500,
    maxResponseBytes: 1024 * 1024,
  });
  const text = res.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // non-JSON answers are checked through `text`
  }
  return { status: res.status, headers: res.headers, body, text };
}

const ORDER = 'query($id: ID!) { order(id: $id) { id name } }';
const refundDoc = (key?: string): string =>
  `mutation($input: RefundInput!) { refundCreate(input: $input)${key === undefined ? '' : ` @idempotent(key: "${key}")`} { refund { id } userErrors { field message } } }`;
const refundInput = (amount: string, orderId = 12345, parent = 71001, gateway = 'shopify_payments'): Record<string, unknown> => ({
  input: {
    orderId: `gid://shopify/Order/${orderId}`,
    transactions: [{ orderId: `gid://shopify/Order/${orderId}`, parentId: `gid://shopify/OrderTransaction/${parent}`, amount, gateway, kind: 'REFUND' }],
  },
});

beforeAll(async () => {
  await emu.start();
});
afterAll(() => emu.stop());
beforeEach(() => emu.reset());
afterEach(() => vi.useRealTimers());

describe('ShopifyEmulator', () => {
  it('answers an order by GID with cost extensions and the version header', async () => {
    const a = await gql(ORDER, { id: 'gid://shopify/Order/12345' });
    expect(a.status).toBe(200);
    expect(a.headers['x-shopify-api-version']).toBe('2026-07');
    expect(a.body.data).toMatchObject({ order: { name: '#1042', displayFulfillmentStatus: 'FULFILLED' } });
    expect(a.body.extensions).toMatchObject({ cost: { throttleStatus: { maximumAvailable: 2000, restoreRate: 100 } } });
    expect((await gql(ORDER, { id: 'gid://shopify/Order/1' })).body.data).toEqual({ order: null });
  });

  it('refuses a wrong token with 401 and Shopify’s body', async () => {
    const a = await gql(ORDER, { id: 'gid://shopify/Order/12345' }, { token: 'nope' });
    expect(a.status).toBe(401);
    expect(a.body).toEqual({ errors: '[API] Invalid API key or access token (unrecognized login or wrong password)' });
    shop.setAccessToken('shpat_rotated');
    expect((await gql(ORDER, { id: 'gid://shopify/Order/12345' }, { token: 'shpat_rotated' })).status).toBe(200);
    expect((await gql(ORDER, { id: 'gid://shopify/Order/12345' }, { token: SHOPIFY_EMULATOR_TOKEN })).status).toBe(401);
  });

  it('answers 404 for a bad version and falls forward from an old one', async () => {
    const bad = await gql(ORDER, { id: 'gid://shopify/Order/12345' }, { version: '2026-13' });
    expect(bad.status).toBe(404);
    expect(bad.body).toEqual({ errors: 'Not Found' });
    const old = await gql(ORDER, { id: 'gid://shopify/Order/12345' }, { version: '2023-04' });
    expect(old.status).toBe(200);
    expect(old.headers['x-shopify-api-version']).toBe('2025-10');
  });

  it('requires @idempotent on refundCreate from 2026-04', async () => {
    const a = await gql(refundDoc(), refundInput('1.00'));
    expect(a.body.errors).toBeInstanceOf(Array);
    expect(shop.refundCount(12345)).toBe(0);
  });

  it('deduplicates a refund by key and refuses the key with other input', async () => {
    const first = await gql(refundDoc('k-1'), refundInput('10.00'));
    const again = await gql(refundDoc('k-1'), refundInput('10.00'));
    expect(again.body.data).toEqual(first.body.data);
    expect(shop.refundCount(12345)).toBe(1);
    const other = await gql(refundDoc('k-1'), refundInput('11.00'));
    expect(other.body.data).toMatchObject({
      refundCreate: { refund: null, userErrors: [{ message: 'The same idempotency key cannot be used with different operation parameters.' }] },
    });
    expect(shop.refundCount(12345)).toBe(1);
  });

  it('keeps an @idempotent key 24 h from its first use: a resend after that is a new refund (VENDORS.md §1.9)', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const first = await gql(refundDoc('k-ttl'), refundInput('10.00'));
    vi.setSystemTime(Date.now() + 24 * 3600_000 - 1_000);
    const within = await gql(refundDoc('k-ttl'), refundInput('10.00'));
    expect(within.body.data).toEqual(first.body.data);
    expect(shop.refundCount(12345)).toBe(1);
    vi.setSystemTime(Date.now() + 2_000); // 24 h and a second after the first use
    const after = await gql(refundDoc('k-ttl'), refundInput('10.00'));
    const id = (a: Answer): unknown => (a.body.data as { refundCreate: { refund: { id: string } | null } }).refundCreate.refund?.id;
    expect(id(after)).toEqual(expect.any(String));
    expect(id(after)).not.toBe(id(first));
    expect(shop.refundCount(12345)).toBe(2);
    // the new refund holds the key afresh: its resend replays it
    expect((await gql(refundDoc('k-ttl'), refundInput('10.00'))).body.data).toEqual(after.body.data);
    expect(shop.refundCount(12345)).toBe(2);
  });

  it('refuses a refund over the remaining amount without using the key', async () => {
    const over = await gql(refundDoc('k-2'), refundInput('200.00'));
    expect(over.body.data).toMatchObject({ refundCreate: { refund: null, userErrors: [{ field: ['transactions', '0', 'amount'] }] } });
    const ok = await gql(refundDoc('k-2'), refundInput('120.00'));
    expect(ok.body.data).toMatchObject({ refundCreate: { userErrors: [] } });
    expect(shop.order(12345)?.displayFinancialStatus).toBe('REFUNDED');
  });

  it('requires the presentment currency on a refund of a multi-currency order, without using the key', async () => {
    const eur = (currency?: string): Record<string, unknown> => {
      const v = refundInput('10.00', 1004, 71050);
      return { input: { ...(v.input as Record<string, unknown>), ...(currency === undefined ? {} : { currency }) } };
    };
    for (const currency of [undefined, 'USD']) {
      const refused = await gql(refundDoc('k-3'), eur(currency));
      expect(refused.body.data).toMatchObject({ refundCreate: { refund: null, userErrors: [{ field: ['currency'] }] } });
    }
    expect(shop.refundCount(1004)).toBe(0);
    const ok = await gql(refundDoc('k-3'), eur('EUR'));
    expect(ok.body.data).toMatchObject({ refundCreate: { userErrors: [] } });
    expect(shop.refundCount(1004)).toBe(1);
    // a same-currency order takes its own currency as well as none
    expect((await gql(refundDoc('k-4'), { input: { ...(refundInput('1.00').input as Record<string, unknown>), currency: 'USD' } })).body.data).toMatchObject({
      refundCreate: { userErrors: [] },
    });
  });

  it('keeps money in the minor units of the currency the customer paid in: KWD in fils, JPY in whole yen', async () => {
    const money = async (id: number): Promise<unknown> => {
      const a = await gql(ORDER, { id: `gid://shopify/Order/${id}` });
      const order = (a.body.data as { order: { totalPriceSet: unknown; transactions: Array<{ maximumRefundableV2: unknown }> } }).order;
      return [order.totalPriceSet, order.transactions[0].maximumRefundableV2];
    };
    expect(await money(1006)).toEqual([
      { shopMoney: { amount: '147.06', currencyCode: 'USD' }, presentmentMoney: { amount: '45.250', currencyCode: 'KWD' } },
      { amount: '45.250', currencyCode: 'KWD' },
    ]);
    expect(await money(1007)).toEqual([
      { shopMoney: { amount: '80.40', currencyCode: 'USD' }, presentmentMoney: { amount: '12000', currencyCode: 'JPY' } },
      { amount: '12000', currencyCode: 'JPY' },
    ]);
  });

  it('refunds a KWD order to the fils, and refuses an amount with more decimals than the currency has, without using the key', async () => {
    const kwd = (amount: string): Record<string, unknown> => ({ input: { ...(refundInput(amount, 1006, 71070).input as Record<string, unknown>), currency: 'KWD' } });
    const userErrors = (a: Answer): unknown => (a.body.data as { refundCreate: { userErrors: unknown } }).refundCreate.userErrors;
    const tooPrecise = await gql(refundDoc('k-kwd'), kwd('12.3456'));
    expect(userErrors(tooPrecise)).toEqual([{ field: ['transactions', '0', 'amount'], message: 'Amount has too many decimal places for KWD' }]);
    expect(userErrors(await gql(refundDoc('k-kwd'), kwd('12.345')))).toEqual([]);
    expect(shop.order(1006)?.refunds.map((r) => r.amountCents)).toEqual([12_345]);
    const over = await gql(refundDoc('k-kwd-2'), kwd('32.906'));
    expect(userErrors(over)).toEqual([
      { field: ['transactions', '0', 'amount'], message: 'Refund amount 32.906 KWD exceeds the maximum refundable amount 32.905 KWD' },
    ]);
    // yen have no decimals; trailing zeros are the same amount
    const jpy = (amount: string): Record<string, unknown> => ({ input: { ...(refundInput(amount, 1007, 71080).input as Record<string, unknown>), currency: 'JPY' } });
    expect(userErrors(await gql(refundDoc('k-jpy'), jpy('100.5')))).toEqual([{ field: ['transactions', '0', 'amount'], message: 'Amount has too many decimal places for JPY' }]);
    expect(userErrors(await gql(refundDoc('k-jpy'), jpy('100.00')))).toEqual([]);
    expect(shop.order(1007)?.refunds.map((r) => r.amountCents)).toEqual([100]);
    // and cents have 2
    expect(userErrors(await gql(refundDoc('k-usd'), refundInput('12.345')))).toMatchObject([{ field: ['transactions', '0', 'amount'] }]);
    expect(shop.refundCount(12345)).toBe(0);
  });

  it('setRefundTransactionStatus: the refund transactions made from then on carry that status (a Refund record is not proof money moved, VENDORS.md §1.8), until reset', async () => {
    const statuses = (a: Answer): unknown =>
      (a.body.data as { refundCreate: { refund: { transactions: { nodes: Array<{ status: string }> } } } }).refundCreate.refund.transactions.nodes.map((t) => t.status);
    shop.setRefundTransactionStatus('UNKNOWN');
    const unknown = await gql(refundDoc('k-status-1'), refundInput('10.00'));
    expect(statuses(unknown)).toEqual(['UNKNOWN']);
    expect(shop.refundCount(12345)).toBe(1); // the refund is made: only its transaction's status says less
    // a status Shopify may add later goes through as given; a replay under the same key answers the original
    shop.setRefundTransactionStatus('SOME_NEW_STATUS');
    expect(statuses(await gql(refundDoc('k-status-2'), refundInput('1.00')))).toEqual(['SOME_NEW_STATUS']);
    expect(statuses(await gql(refundDoc('k-status-1'), refundInput('10.00')))).toEqual(['UNKNOWN']);
    // a refund transaction that did not fail holds its amount: no more than what is left can be refunded after it
    const over = await gql(refundDoc('k-status-3'), refundInput('110.00'));
    expect(over.body.data).toMatchObject({ refundCreate: { refund: null, userErrors: [{ field: ['transactions', '0', 'amount'] }] } });
    emu.reset();
    expect(statuses(await gql(refundDoc('k-status-4'), refundInput('10.00')))).toEqual(['SUCCESS']);
  });

  it('updates the note with orderUpdate', async () => {
    const a = await gql('mutation($input: OrderInput!) { orderUpdate(input: $input) { order { id note } userErrors { field message } } }', {
      input: { id: 'gid://shopify/Order/450789469', note: 'Leave at the door' },
    });
    expect(a.body.data).toEqual({ orderUpdate: { order: { id: 'gid://shopify/Order/450789469', note: 'Leave at the door' }, userErrors: [] } });
  });

  it('shapes throttled and status faults like Shopify', async () => {
    emu.fault({ vendor: 'shopify', kind: 'throttled' });
    const t = await gql(ORDER, { id: 'gid://shopify/Order/12345' });
    expect(t.status).toBe(200);
    expect(t.body).toMatchObject({
      errors: [{ message: 'Throttled', extensions: { code: 'THROTTLED' } }],
      extensions: { cost: { requestedQueryCost: 12, throttleStatus: { maximumAvailable: 2000, currentlyAvailable: 0, restoreRate: 100 } } },
    });
    emu.fault({ vendor: 'shopify', kind: 'status', status: 429 });
    const r = await gql(ORDER, { id: 'gid://shopify/Order/12345' });
    expect(r.status).toBe(429);
    expect(r.headers['retry-after']).toBe('2.0');
    expect(String(r.body.errors)).toMatch(/^Exceeded 2 calls per second/);
    emu.fault({ vendor: 'shopify', kind: 'status', status: 502 });
    const e = await gql(ORDER, { id: 'gid://shopify/Order/12345' });
    expect(e.status).toBe(502);
    expect(e.text).toMatch(/^<!DOCTYPE html>/);
  });
  it('answers a `throttled` fault on the token endpoint with 429 + Retry-After, not GraphQL\'s THROTTLED 200', async () => {
    emu.fault({ vendor: 'shopify', kind: 'throttled' });
    const res = await fetch(`${emu.url}/admin/oauth/access_token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ client_id: SHOPIFY_EMULATOR_CLIENT_ID, client_secret: SHOPIFY_EMULATOR_CLIENT_SECRET, grant_type: 'client_credentials' }),
    });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('2.0');
    expect(res.headers.get('x-shopify-api-version')).toBeNull();
    expect(JSON.stringify(await res.json())).not.toMatch(/THROTTLED/);
    expect(emu.count({ path: /^\/admin\/oauth\/access_token$/, applied: false })).toBe(1);
  });

  it('holds a split-tender order (gift card booked first, then a card): each payment refundable up to what it took', async () => {
    const a = await gql(ORDER, { id: 'gid://shopify/Order/1005' });
    const txs = ((a.body.data as { order: { transactions: Array<Record<string, unknown>> } }).order.transactions).map((t) => [t.gateway, (t.amountSet as { presentmentMoney: { amount: string } }).presentmentMoney.amount]);
    expect(txs).toEqual([['gift_card', '10.00'], ['shopify_payments', '35.00']]);
    const overGiftCard = await gql(refundDoc('k-split-1'), refundInput('20.00', 1005, 71060, 'gift_card'));
    expect((overGiftCard.body.data as { refundCreate: { userErrors: unknown[] } }).refundCreate.userErrors).toHaveLength(1);
    const toCard = await gql(refundDoc('k-split-2'), refundInput('20.00', 1005, 71061));
    expect((toCard.body.data as { refundCreate: { userErrors: unknown[] } }).refundCreate.userErrors).toEqual([]);
    expect(shop.refundCount(1005)).toBe(1);
  });
});

describe('ShopifyEmulator: lists as long as `first:` asks (VENDORS.md §1.3, §1.5)', () => {
  const LONG = `gid://shopify/Order/${SHOPIFY_LONG_ORDER.id}`;
  const MANY = `gid://shopify/Product/${SHOPIFY_MANY_VARIANTS_PRODUCT.id}`;
  type Connection = { nodes: Array<{ id: string }>; pageInfo?: { hasNextPage: boolean; endCursor: string | null } };

  it('a connection answers at most `first` nodes, and pageInfo only when its selection names it', async () => {
    const bare = await gql('query($id: ID!) { order(id: $id) { lineItems(first: 1) { nodes { id name } } } }', { id: 'gid://shopify/Order/12345' });
    const items = (bare.body.data as { order: { lineItems: Connection } }).order.lineItems;
    expect(items.nodes.map((n) => n.id)).toEqual(['gid://shopify/LineItem/66001']);
    expect(items).not.toHaveProperty('pageInfo');
    const asked = await gql('query($id: ID!) { order(id: $id) { lineItems(first: 1) { nodes { id } pageInfo { hasNextPage endCursor } } } }', { id: 'gid://shopify/Order/12345' });
    expect((asked.body.data as { order: { lineItems: Connection } }).order.lineItems.pageInfo).toEqual(expect.objectContaining({ hasNextPage: true, endCursor: expect.any(String) }));
  });

  it('the >50-line order answers 50 of its 55 line items with hasNextPage true; `after: endCursor` gives the other 5, hasNextPage false', async () => {
    const doc = 'query($id: ID!, $after: String) { order(id: $id) { lineItems(first: 50, after: $after) { nodes { id } pageInfo { hasNextPage endCursor } } } }';
    const first = (await gql(doc, { id: LONG })).body.data as { order: { lineItems: Connection } };
    expect(first.order.lineItems.nodes).toHaveLength(50);
    expect(first.order.lineItems.pageInfo?.hasNextPage).toBe(true);
    const rest = (await gql(doc, { id: LONG, after: first.order.lineItems.pageInfo?.endCursor })).body.data as { order: { lineItems: Connection } };
    expect(rest.order.lineItems.nodes).toHaveLength(SHOPIFY_LONG_ORDER.lineItems - 50);
    expect(rest.order.lineItems.nodes[0].id).toBe('gid://shopify/LineItem/66150');
    expect(rest.order.lineItems.pageInfo?.hasNextPage).toBe(false);
  });

  it('the >50-variant product answers 50 of its 60 variants with hasNextPage true; an order read whole says hasNextPage false', async () => {
    const product = (await gql('query($id: ID!) { product(id: $id) { variants(first: 50) { nodes { id } pageInfo { hasNextPage } } } }', { id: MANY })).body.data as {
      product: { variants: Connection };
    };
    expect(product.product.variants.nodes).toHaveLength(50);
    expect(product.product.variants.pageInfo?.hasNextPage).toBe(true);
    const small = (await gql('query($id: ID!) { order(id: $id) { lineItems(first: 50) { nodes { id } pageInfo { hasNextPage } } } }', { id: 'gid://shopify/Order/12345' }))
      .body.data as { order: { lineItems: Connection } };
    expect(small.order.lineItems.nodes).toHaveLength(2);
    expect(small.order.lineItems.pageInfo?.hasNextPage).toBe(false);
  });

  it('plain lists (fulfillments, trackingInfo, transactions) are sized by `first` too, without pageInfo', async () => {
    const doc = 'query($id: ID!) { order(id: $id) { fulfillments(first: 0) { status trackingInfo(first: 0) { number } } transactions(first: 1) { id } } }';
    const order = ((await gql(doc, { id: 'gid://shopify/Order/1005' })).body.data as { order: { fulfillments: unknown[]; transactions: Array<{ id: string }> } }).order;
    expect(order.fulfillments).toEqual([]);
    expect(order.transactions.map((t) => t.id)).toEqual(['gid://shopify/OrderTransaction/71060']);
    const tracked = (await gql('query($id: ID!) { order(id: $id) { fulfillments(first: 5) { trackingInfo(first: 0) { number } } } }', { id: 'gid://shopify/Order/12345' })).body
      .data as { order: { fulfillments: Array<{ trackingInfo: unknown[] }> } };
    expect(tracked.order.fulfillments).toHaveLength(1);
    expect(tracked.order.fulfillments[0].trackingInfo).toEqual([]);
  });
});
