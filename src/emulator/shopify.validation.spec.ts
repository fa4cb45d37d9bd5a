import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { vendorRequest, type VendorHttpResponse } from '../vendors/http/vendor-http.js';
import { refundMutation } from '../vendors/shopify/shopify.graphql.js';
import { interpretShopifyResponse } from '../vendors/shopify/shopify.client.js';
import { ShopifyEmulator } from './shopify.emulator.js';
import { VendorEmulator } from './vendor-emulator.js';

/** The emulator refuses before running what Shopify refuses before running, in Shopify's shape (graphql-ruby). */
const shop = new ShopifyEmulator();
const emu = new VendorEmulator([shop]);

const KEY = '0b0c6a52-5f1e-4d0b-9a57-7c1d2e3f4a5b';
const ORDER_GID = 'gid://shopify/Order/12345';
const transaction = { orderId: ORDER_GID, parentId: 'gid://shopify/OrderTransaction/71001', amount: '1.00', gateway: 'shopify_payments', kind: 'REFUND' };

async function post(query: string, variables: Record<string, unknown>, version = '2026-07'): Promise<VendorHttpResponse> {
  return vendorRequest({
    method: 'POST',
    url: `${emu.url}/admin/api/${version}/graphql.json`,
    headers: { 'content-type': 'application/json', 'x-shopify-access-token': shop.accessToken },
    body: JSON.stringify({ query, variables }),
    timeoutMs: 2_000,
    connectTimeoutMs: 500,
    maxResponseBytes: 1024 * 1024,
  });
}
const bodyOf = (res: VendorHttpResponse) => res.json() as { data?: unknown; errors?: Array<Record<string, unknown>> };

beforeAll(async () => {
  await emu.start();
});
afterAll(() => emu.stop());
beforeEach(() => emu.reset());

describe('Shopify emulator: errors from before execution', () => {
  it('@idempotent on a version before 2026-01: undefinedDirective with locations and a path from the operation; nothing refunded', async () => {
    const res = await post(refundMutation(KEY), { input: { orderId: ORDER_GID, transactions: [transaction] } }, '2025-10');
    const body = bodyOf(res);
    expect(body.data).toBeUndefined();
    expect(body.errors).toEqual([
      {
        message: "Directive 'idempotent' is not defined",
        locations: [{ line: 2, column: 31 }], // the @ of the directive
        path: ['mutation Refund', 'refundCreate'],
        extensions: { code: 'undefinedDirective', directiveName: 'idempotent' },
      },
    ]);
    expect(shop.refundCount(12345)).toBe(0);
    // …which the gateway reads as a refusal of a refund that never ran.
    expect(interpretShopifyResponse(res, 'refundCreate')).toMatchObject({ ok: false, kind: 'rejected' });
  });

  it('a transaction without its orderId (required, VENDORS.md §1.8): INVALID_VARIABLE, no path; the key is not used up', async () => {
    const { orderId: _left, ...withoutOrder } = transaction;
    const res = await post(refundMutation(KEY), { input: { orderId: ORDER_GID, transactions: [withoutOrder] } });
    const [error] = bodyOf(res).errors ?? [];
    expect(error).toMatchObject({
      message: 'Variable $input of type RefundInput! was provided invalid value for transactions.0.orderId (Expected value to not be null)',
      locations: [{ line: 1, column: 17 }],
      extensions: { code: 'INVALID_VARIABLE', problems: [{ path: ['transactions', 0, 'orderId'], explanation: 'Expected value to not be null' }] },
    });
    expect(error).not.toHaveProperty('path');
    expect(bodyOf(res).data).toBeUndefined();
    expect(shop.refundCount(12345)).toBe(0);
    expect(interpretShopifyResponse(res, 'refundCreate')).toMatchObject({ ok: false, kind: 'rejected' });
    // Every required field is checked, the refund's own orderId too.
    const bare = bodyOf(await post(refundMutation(KEY), { input: { transactions: [{ parentId: transaction.parentId }] } })).errors?.[0];
    expect((bare?.extensions as { problems: unknown[] }).problems).toEqual(
      [['orderId'], ['transactions', 0, 'orderId'], ['transactions', 0, 'amount'], ['transactions', 0, 'kind'], ['transactions', 0, 'gateway']].map((path) => ({
        path,
        explanation: 'Expected value to not be null',
      })),
    );
    // Refused before running: the same key then makes the refund.
    const ok = bodyOf(await post(refundMutation(KEY), { input: { orderId: ORDER_GID, transactions: [transaction] } }));
    expect(ok.data).toMatchObject({ refundCreate: { userErrors: [] } });
    expect(shop.refundCount(12345)).toBe(1);
  });

  it('an id that is no global id: INVALID_VARIABLE as a variable, argumentLiteralsIncompatible (with a path) as a literal', async () => {
    const asVariable = bodyOf(await post('query OrderLookup($id: ID!) {\n  order(id: $id) { id }\n}', { id: '12345' })).errors?.[0];
    expect(asVariable).toMatchObject({ locations: [{ line: 1, column: 19 }], extensions: { code: 'INVALID_VARIABLE', value: '12345' } });
    expect(asVariable).not.toHaveProperty('path');
    const asLiteral = bodyOf(await post('{ order(id: "12345") { id } }', {})).errors?.[0];
    expect(asLiteral).toEqual({
      message: "Invalid global id '12345'",
      locations: [{ line: 1, column: 13 }],
      path: ['query', 'order', 'id'],
      extensions: { code: 'argumentLiteralsIncompatible' },
    });
  });

  it('an operation the emulated schema lacks: undefinedField on the root field', async () => {
    const [error] = bodyOf(await post('mutation Probe { productDelete(input: {}) { deletedProductId } }', {})).errors ?? [];
    expect(error).toMatchObject({ locations: [{ line: 1, column: 18 }], path: ['mutation Probe', 'productDelete'], extensions: { code: 'undefinedField', typeName: 'Mutation', fieldName: 'productDelete' } });
  });

  it('execution errors keep their shape: the key required from 2026-04 is a run-time BAD_REQUEST with data', async () => {
    const res = bodyOf(await post('mutation($input: RefundInput!) { refundCreate(input: $input) { refund { id } } }', { input: { orderId: ORDER_GID, transactions: [transaction] } }));
    expect(res).toMatchObject({ data: { refundCreate: null }, errors: [{ extensions: { code: 'BAD_REQUEST' } }] });
    expect(res.errors?.[0]).not.toHaveProperty('locations');
  });
});
