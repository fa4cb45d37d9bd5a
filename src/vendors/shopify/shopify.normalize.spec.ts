import { describe, expect, it } from 'vitest';
import { ORDER_LIST_FIRST, PRODUCT_VARIANTS_FIRST } from './shopify.graphql.js';
import { normalizeOrder, normalizeProduct, normalizeRefund } from './shopify.normalize.js';

const refund = (statuses: string[]) => ({
  id: 'gid://shopify/Refund/1',
  totalRefundedSet: { shopMoney: { amount: statuses.length ? '2.00' : '0.00', currencyCode: 'USD' } },
  transactions: { nodes: statuses.map((status, i) => ({ id: `gid://shopify/OrderTransaction/${i}`, status })) },
});

describe('normalizeRefund: a refund record is not proof money moved (VENDORS.md §1.8, §1.9 point 7)', () => {
  it('success only when every refund transaction is SUCCESS', () => {
    expect(normalizeRefund('1', refund(['SUCCESS'])).status).toBe('success');
    expect(normalizeRefund('1', refund(['SUCCESS', 'SUCCESS'])).status).toBe('success');
  });

  it('no transaction at all → pending (accepted, not proven), never success', () => {
    expect(normalizeRefund('1', refund([])).status).toBe('pending');
    expect(normalizeRefund('1', { id: 'gid://shopify/Refund/1' }).status).toBe('pending');
  });

  it('a transaction not yet settled → pending; failed only when every transaction is FAILURE', () => {
    expect(normalizeRefund('1', refund(['SUCCESS', 'AWAITING_RESPONSE'])).status).toBe('pending');
    expect(normalizeRefund('1', refund(['PENDING'])).status).toBe('pending');
    expect(normalizeRefund('1', refund(['FAILURE'])).status).toBe('failed');
    expect(normalizeRefund('1', refund(['FAILURE', 'FAILURE'])).status).toBe('failed');
  });

  it('a declined attempt beside one that went through is not a failed refund: money moved (never an invitation to refund again)', () => {
    expect(normalizeRefund('1', refund(['FAILURE', 'SUCCESS'])).status).toBe('success');
    expect(normalizeRefund('1', refund(['SUCCESS', 'FAILURE'])).status).toBe('success');
    // Still on its way: pending, as without the declined attempt.
    expect(normalizeRefund('1', refund(['FAILURE', 'PENDING'])).status).toBe('pending');
    expect(normalizeRefund('1', refund(['FAILURE', 'SUCCESS', 'AWAITING_RESPONSE'])).status).toBe('pending');
  });

  it('a transaction in ERROR → error, not failed: Shopify does not say the money did not move (and it outweighs a FAILURE beside it)', () => {
    expect(normalizeRefund('1', refund(['ERROR'])).status).toBe('error');
    expect(normalizeRefund('1', refund(['SUCCESS', 'ERROR'])).status).toBe('error');
    expect(normalizeRefund('1', refund(['FAILURE', 'ERROR'])).status).toBe('error');
    expect(normalizeRefund('1', refund(['FAILURE'])).status).toBe('failed');
  });

  it('UNKNOWN ("the transaction status is unknown") says no more than ERROR → error, never pending (VENDORS.md §1.8)', () => {
    expect(normalizeRefund('1', refund(['UNKNOWN'])).status).toBe('error');
    expect(normalizeRefund('1', refund(['SUCCESS', 'UNKNOWN'])).status).toBe('error');
    expect(normalizeRefund('1', refund(['FAILURE', 'UNKNOWN'])).status).toBe('error');
    expect(normalizeRefund('1', refund(['PENDING', 'UNKNOWN'])).status).toBe('error');
  });

  it('a status outside those VENDORS.md lists (one Shopify adds later, another spelling, none at all) → error: never read as success or pending', () => {
    for (const status of ['SETTLING', 'success', 'pending', '', 'constructor', 'toString']) {
      expect(normalizeRefund('1', refund([status])).status, status).toBe('error');
      expect(normalizeRefund('1', refund(['SUCCESS', status])).status, status).toBe('error');
    }
    const noStatus = { id: 'gid://shopify/Refund/1', transactions: { nodes: [{ id: 'gid://shopify/OrderTransaction/1' }] } };
    expect(normalizeRefund('1', noStatus).status).toBe('error');
    const notText = { id: 'gid://shopify/Refund/1', transactions: { nodes: [{ id: 'gid://shopify/OrderTransaction/1', status: 1 }] } };
    expect(normalizeRefund('1', notText).status).toBe('error');
  });
});

describe('lists read with `first:` and never paged: a cut list is marked truncated (VENDORS.md §1.3, §1.5)', () => {
  const variants = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `gid://shopify/ProductVariant/${i + 1}`, title: `Size ${i}`, sku: `S-${i}`, price: '1.00', inventoryQuantity: 1 }));
  const lineItems = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `Item ${i}`, quantity: 1, sku: null }));
  const tracking = (n: number) => Array.from({ length: n }, (_, i) => ({ number: `T${i}` }));

  it('a product whose variants connection says hasNextPage → truncated: true, after the variants it has', () => {
    const p = normalizeProduct('7', { title: 'Shoe', variants: { nodes: variants(PRODUCT_VARIANTS_FIRST), pageInfo: { hasNextPage: true } } });
    expect(p.truncated).toBe(true);
    expect(p.variants).toHaveLength(PRODUCT_VARIANTS_FIRST);
    expect(Object.keys(p).slice(-2)).toEqual(['variants', 'truncated']);
  });

  it('a product whose variants are all there (hasNextPage false, even with exactly `first` of them) → no truncated key', () => {
    expect(normalizeProduct('7', { variants: { nodes: variants(2), pageInfo: { hasNextPage: false } } })).not.toHaveProperty('truncated');
    expect(normalizeProduct('7', { variants: { nodes: variants(PRODUCT_VARIANTS_FIRST), pageInfo: { hasNextPage: false } } })).not.toHaveProperty('truncated');
    expect(normalizeProduct('7', { variants: { nodes: variants(3) } })).not.toHaveProperty('truncated');
  });

  it('a connection answered without pageInfo counts as cut when it came back full', () => {
    expect(normalizeProduct('7', { variants: { nodes: variants(PRODUCT_VARIANTS_FIRST) } }).truncated).toBe(true);
  });

  it('an order whose lineItems connection has a next page → truncated: true', () => {
    const o = normalizeOrder('1', { lineItems: { nodes: lineItems(ORDER_LIST_FIRST.lineItems), pageInfo: { hasNextPage: true } }, fulfillments: [] });
    expect(o.truncated).toBe(true);
    expect(o.items).toHaveLength(ORDER_LIST_FIRST.lineItems);
  });

  it('an order whose plain lists come back with the one entry more they are asked for → truncated: true, and only `first` kept', () => {
    const more = Array.from({ length: ORDER_LIST_FIRST.fulfillments + 1 }, (_, i) => ({ status: 'SUCCESS', trackingInfo: [{ number: `F${i}` }] }));
    const o = normalizeOrder('1', { lineItems: { nodes: [], pageInfo: { hasNextPage: false } }, fulfillments: more });
    expect(o.truncated).toBe(true);
    expect(o.trackingNumbers).toHaveLength(ORDER_LIST_FIRST.fulfillments); // the extra fulfillment only says there are more
    const parcels = [{ status: 'SUCCESS', trackingInfo: tracking(ORDER_LIST_FIRST.trackingInfo + 1) }];
    const p = normalizeOrder('1', { lineItems: { nodes: [], pageInfo: { hasNextPage: false } }, fulfillments: parcels });
    expect(p.truncated).toBe(true);
    expect(p.trackingNumbers).toHaveLength(ORDER_LIST_FIRST.trackingInfo);
  });

  it('an order whose plain lists hold exactly `first` entries (all of them) → no truncated key', () => {
    const all = Array.from({ length: ORDER_LIST_FIRST.fulfillments }, (_, i) => ({ status: 'SUCCESS', trackingInfo: [{ number: `F${i}` }] }));
    expect(normalizeOrder('1', { lineItems: { nodes: [], pageInfo: { hasNextPage: false } }, fulfillments: all })).not.toHaveProperty('truncated');
    const parcels = [{ status: 'SUCCESS', trackingInfo: tracking(ORDER_LIST_FIRST.trackingInfo) }];
    const o = normalizeOrder('1', { lineItems: { nodes: [], pageInfo: { hasNextPage: false } }, fulfillments: parcels });
    expect(o).not.toHaveProperty('truncated');
    expect(o.trackingNumbers).toHaveLength(ORDER_LIST_FIRST.trackingInfo);
  });

  it('an order read whole → no truncated key', () => {
    const o = normalizeOrder('1', {
      lineItems: { nodes: lineItems(2), pageInfo: { hasNextPage: false } },
      fulfillments: [{ status: 'SUCCESS', trackingInfo: tracking(ORDER_LIST_FIRST.trackingInfo - 1) }],
    });
    expect(o).not.toHaveProperty('truncated');
    expect(o.trackingNumbers).toHaveLength(ORDER_LIST_FIRST.trackingInfo - 1);
  });
});
