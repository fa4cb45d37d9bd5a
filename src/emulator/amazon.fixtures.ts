/**
 * Seeded SP-API data for the Amazon emulator (fictional, shaped like
 * ordersV0.json). Order 112-0000002-7654321 pages its items (NextToken);
 * 113-0000004-0000024 has more pages than a client should follow; the items of
 * Pending 114-0000003-0000003 carry no pricing, as getOrderItems gives none.
 */

/** Items per getOrderItems page, small so paging is exercised. */
export const AMAZON_ITEMS_PAGE_SIZE = 2;

export const AMAZON_ORDER_IDS = {
  shipped: '112-0000001-1234567',
  paged: '112-0000002-7654321',
  pending: '114-0000003-0000003',
  manyPages: '113-0000004-0000024',
  /** well-formed, unknown: getOrder answers 200 {"payload":{}} */
  unknown: '999-0000000-0000000',
} as const;

const usd = (amount: string) => ({ CurrencyCode: 'USD', Amount: amount });

export const AMAZON_FIXTURE_ORDERS: Record<string, Record<string, unknown>> = {
  [AMAZON_ORDER_IDS.shipped]: {
    AmazonOrderId: AMAZON_ORDER_IDS.shipped,
    OrderStatus: 'Shipped',
    PurchaseDate: '2026-08-02T14:05:11Z',
    LastUpdateDate: '2026-08-03T09:12:40Z',
    FulfillmentChannel: 'MFN',
    SalesChannel: 'Amazon.com',
    MarketplaceId: 'ATVPDKIKX0DER',
    OrderTotal: usd('64.98'),
    NumberOfItemsShipped: 2,
    NumberOfItemsUnshipped: 0,
    PaymentMethod: 'Other',
    IsPrime: false,
    BuyerInfo: { BuyerEmail: 'q4w8e2r6t0y3u7i1@marketplace.amazon.com', BuyerName: 'Marcus Webb' },
    ShippingAddress: {
      Name: 'Marcus Webb',
      AddressLine1: '1600 Fake Harbor Blvd',
      City: 'Seattle',
      StateOrRegion: 'WA',
      PostalCode: '98101-1234',
      CountryCode: 'US',
      Phone: '+1 206-555-0199',
    },
  },
  [AMAZON_ORDER_IDS.paged]: {
    AmazonOrderId: AMAZON_ORDER_IDS.paged,
    OrderStatus: 'Unshipped',
    PurchaseDate: '2026-08-05T08:00:00Z',
    LastUpdateDate: '2026-08-05T08:10:00Z',
    FulfillmentChannel: 'AFN',
    OrderTotal: usd('150.00'),
    // Amazon-fulfilled: no buyer email (Amazon gives one only for merchant-fulfilled orders; see orderV2026).
    BuyerInfo: {},
    ShippingAddress: { City: 'Portland', StateOrRegion: 'OR', PostalCode: '97201', CountryCode: 'US' },
  },
  [AMAZON_ORDER_IDS.pending]: {
    AmazonOrderId: AMAZON_ORDER_IDS.pending,
    OrderStatus: 'Pending',
    PurchaseDate: '2026-08-06T10:00:00Z',
    LastUpdateDate: '2026-08-06T10:00:00Z',
    FulfillmentChannel: 'MFN',
  },
  [AMAZON_ORDER_IDS.manyPages]: {
    AmazonOrderId: AMAZON_ORDER_IDS.manyPages,
    OrderStatus: 'Shipped',
    PurchaseDate: '2026-07-01T12:00:00Z',
    LastUpdateDate: '2026-07-02T12:00:00Z',
    FulfillmentChannel: 'AFN',
    OrderTotal: usd('240.00'),
  },
};

function item(n: number, shipped: boolean): Record<string, unknown> {
  const id = String(n).padStart(3, '0');
  return {
    ASIN: `B0EMU00${id}`,
    OrderItemId: `6800000000${id}`,
    SellerSKU: `EMU-SKU-${id}`,
    Title: `Emulator item ${id}`,
    QuantityOrdered: 1,
    QuantityShipped: shipped ? 1 : 0,
    ItemPrice: usd('10.00'),
    ItemTax: usd('0.80'),
  };
}

/** An item of a Pending order: getOrderItems gives no pricing for it (VENDORS.md §2.2), so no ItemPrice or ItemTax. */
function unpriced(i: Record<string, unknown>): Record<string, unknown> {
  const { ItemPrice: _price, ItemTax: _tax, ...rest } = i;
  return rest;
}

export const AMAZON_FIXTURE_ITEMS: Record<string, Record<string, unknown>[]> = {
  [AMAZON_ORDER_IDS.shipped]: [
    { ...item(1, true), Title: 'Aurora Trail Running Shoe - 9 / Blue', ItemPrice: usd('49.99') },
    { ...item(2, true), Title: 'Trail Socks (3 pack)', ItemPrice: usd('14.99') },
  ],
  [AMAZON_ORDER_IDS.paged]: [1, 2, 3, 4, 5].map((n) => item(100 + n, false)),
  [AMAZON_ORDER_IDS.pending]: [unpriced(item(200, false))],
  [AMAZON_ORDER_IDS.manyPages]: Array.from({ length: 24 }, (_, i) => item(300 + i, true)),
};
