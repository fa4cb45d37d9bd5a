/**
 * Lists the gateway reads with `first:` and never pages (one request per call: VENDORS.md §1.5) come back cut on a
 * bigger order or product, and the result says so (`truncated: true`, as amazon_query.get_order_items does), rather
 * than handing the first 50 on as the whole list. Through the full pipeline against the emulator, which honours
 * `first:` and answers `pageInfo` as Shopify does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AMAZON_ORDER_IDS } from '../../src/emulator/amazon.fixtures.js';
import { SHOPIFY_LONG_ORDER, SHOPIFY_MANY_VARIANTS_PRODUCT } from '../../src/emulator/shopify.fixtures.js';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { call } from './support.js';

describe('Shopify reads of lists longer than one answer carries', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_query.get_product', 'amazon_query.get_order_items'], vendors: ['shopify', 'amazon'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  function succeeded(res: { status: number; body: Record<string, unknown> }): Record<string, unknown> {
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', truncated: false });
    // The model reads the same flag as the API caller.
    expect(JSON.parse((res.body.toolResult as { content: string }).content)).toEqual(res.body.result);
    return res.body.result as Record<string, unknown>;
  }

  it('get_product of a product with more than 50 variants: the first 50, and truncated: true', async () => {
    const before = h.emu.requests.length;
    const result = succeeded(await call(h, org, 'shopify_query', { action: 'get_product', productId: String(SHOPIFY_MANY_VARIANTS_PRODUCT.id) }));
    expect(SHOPIFY_MANY_VARIANTS_PRODUCT.variants).toBeGreaterThan(50);
    expect(result.variants).toHaveLength(50);
    expect(result.truncated).toBe(true);
    expect(h.emu.requests.slice(before).filter((r) => r.path.endsWith('/graphql.json'))).toHaveLength(1); // said, not paged
  });

  it('order_lookup of an order with more than 50 line items: the first 50, and truncated: true', async () => {
    const before = h.emu.requests.length;
    const result = succeeded(await call(h, org, 'order_lookup', { action: 'lookup', orderId: String(SHOPIFY_LONG_ORDER.id) }));
    expect(SHOPIFY_LONG_ORDER.lineItems).toBeGreaterThan(50);
    expect(result.items).toHaveLength(50);
    expect(result.truncated).toBe(true);
    expect(h.emu.requests.slice(before).filter((r) => r.path.endsWith('/graphql.json'))).toHaveLength(1);
  });

  it('a product and an order read whole carry no truncated key', async () => {
    const product = succeeded(await call(h, org, 'shopify_query', { action: 'get_product', productId: '632910392' }));
    expect(product.variants).toHaveLength(2);
    expect(product).not.toHaveProperty('truncated');
    const order = succeeded(await call(h, org, 'order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(order.items).toHaveLength(2);
    expect(order).not.toHaveProperty('truncated');
  });

  it('amazon get_order_items of a Pending order (no pricing from SP-API): the items, with itemPrice null', async () => {
    const result = succeeded(await call(h, org, 'amazon_query', { action: 'get_order_items', orderId: AMAZON_ORDER_IDS.pending }));
    const items = result.items as Record<string, unknown>[];
    expect(items.length).toBeGreaterThan(0);
    for (const item of items) expect(item).toMatchObject({ asin: expect.any(String), itemPrice: null });
  });
});
