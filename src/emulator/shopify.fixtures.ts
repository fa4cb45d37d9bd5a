/**
 * Seed data of the Shopify emulator (fictional). Money is kept in integer minor
 * units of its currency so the refund ceiling maths is exact: the `*Cents` fields
 * hold cents for USD or EUR, but fils (1/1000) for KWD and whole yen for JPY.
 * `seedShopifyOrders()` builds fresh objects on every call: reset() must not
 * inherit mutations (notes, refunds).
 */
/** The emulated shop's currency: every shopMoney amount and product price. */
export const SHOP_CURRENCY = 'USD';
export const SHOPIFY_EMULATOR_TOKEN = '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';
/** A Dev Dashboard app of the emulated shop: the client-credentials grant exchanges these for ~24 h tokens. */
export const SHOPIFY_EMULATOR_CLIENT_ID = '8f14e45fceea167a5a36dedd4bea2543';
export const SHOPIFY_EMULATOR_CLIENT_SECRET = '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';
/**
 * A public app's expiring offline token grant on the emulated shop: the refresh token its OAuth
 * install handed out. Each use rotates it (VENDORS.md §1.1).
 */
export const SHOPIFY_EMULATOR_REFRESH_TOKEN = 'shprt_9c2e5b1f7a3d4e6081b2c3d4e5f60001';

/**
 * An order with more line items, and a product with more variants, than the gateway's reads ask for (`first: 50`):
 * their lists come back cut, and the results say `truncated`. No other test fixture refers to them.
 */
export const SHOPIFY_LONG_ORDER = { id: 1051, lineItems: 55 } as const;
export const SHOPIFY_MANY_VARIANTS_PRODUCT = { id: 733000051, variants: 60 } as const;

export interface EmuAddress {
  name: string;
  address1: string;
  address2: string | null;
  city: string;
  province: string;
  provinceCode: string;
  zip: string;
  country: string;
  countryCodeV2: string;
  phone: string | null;
}

/**
 * OrderTransactionStatus (VENDORS.md §1.8), and any other string: a status Shopify may add later
 * (ShopifyEmulator.setRefundTransactionStatus).
 */
export type EmuTransactionStatus = 'SUCCESS' | 'PENDING' | 'FAILURE' | 'ERROR' | 'AWAITING_RESPONSE' | 'UNKNOWN' | (string & {});

export interface EmuTransaction {
  id: number;
  kind: 'SALE' | 'CAPTURE' | 'AUTHORIZATION' | 'REFUND';
  status: EmuTransactionStatus;
  gateway: string;
  amountCents: number;
  parentId?: number;
}

export interface EmuRefund {
  id: number;
  note: string | null;
  amountCents: number;
  createdAt: string;
  transactionIds: number[];
}

export interface EmuOrder {
  id: number;
  name: string;
  email: string | null;
  phone: string | null;
  displayFinancialStatus: string;
  displayFulfillmentStatus: string;
  /** the shop's currency: every shopMoney amount */
  currencyCode: string;
  /** the currency the customer paid in; every *Cents amount of the order is in its minor units */
  presentmentCurrencyCode: string;
  /** shop-currency units per presentment unit (1 when the two currencies are the same) */
  shopPerPresentment: number;
  totalCents: number;
  createdAt: string;
  note: string | null;
  customer: { firstName: string; lastName: string; email: string | null; phone: string | null } | null;
  shippingAddress: EmuAddress | null;
  lineItems: Array<{ id: number; name: string; title: string; sku: string | null; quantity: number; priceCents: number }>;
  fulfillments: Array<{ status: string; tracking: Array<{ number: string; company: string; url: string | null }> }>;
  transactions: EmuTransaction[];
  refunds: EmuRefund[];
}

export interface EmuProduct {
  id: number;
  title: string;
  handle: string;
  status: 'ACTIVE' | 'DRAFT' | 'ARCHIVED';
  vendor: string;
  productType: string;
  totalInventory: number;
  variants: Array<{ id: number; title: string; sku: string; priceCents: number; inventoryQuantity: number }>;
}

const SF: EmuAddress = {
  name: 'Jane Doe',
  address1: '500 Howard Street',
  address2: 'Suite 300',
  city: 'San Francisco',
  province: 'California',
  provinceCode: 'CA',
  zip: '94107',
  country: 'United States',
  countryCodeV2: 'US',
  phone: '+14155550123',
};

const SPRINGFIELD: EmuAddress = {
  name: 'Sam Rivera',
  address1: '742 Evergreen Terrace',
  address2: null,
  city: 'Springfield',
  province: 'Oregon',
  provinceCode: 'OR',
  zip: '97477',
  country: 'United States',
  countryCodeV2: 'US',
  phone: '+15555550142',
};

type Seed = Omit<EmuOrder, 'note' | 'refunds' | 'currencyCode' | 'presentmentCurrencyCode' | 'shopPerPresentment'> &
  Partial<Pick<EmuOrder, 'note' | 'refunds' | 'presentmentCurrencyCode' | 'shopPerPresentment'>>;

function order(o: Seed): EmuOrder {
  return { note: null, refunds: [], currencyCode: SHOP_CURRENCY, presentmentCurrencyCode: SHOP_CURRENCY, shopPerPresentment: 1, ...o };
}

export function seedShopifyOrders(): Map<number, EmuOrder> {
  const orders: EmuOrder[] = [
    order({
      id: 12345, name: '#1042', email: 'jane.doe@example.com', phone: '+14155550123',
      displayFinancialStatus: 'PAID', displayFulfillmentStatus: 'FULFILLED', totalCents: 12_000,
      createdAt: '2026-06-02T10:15:00Z',
      customer: { firstName: 'Jane', lastName: 'Doe', email: 'jane.doe@example.com', phone: '+14155550123' },
      shippingAddress: { ...SF },
      lineItems: [
        { id: 66001, name: 'Aurora Trail Running Shoe - 9 / Blue', title: 'Aurora Trail Running Shoe', sku: 'AUR-9-BLU', quantity: 1, priceCents: 9_000 },
        { id: 66002, name: 'Merino Running Socks - M', title: 'Merino Running Socks', sku: 'MRS-M', quantity: 2, priceCents: 1_500 },
      ],
      fulfillments: [{ status: 'SUCCESS', tracking: [{ number: 'TRACK-001', company: 'UPS', url: 'https://www.ups.com/track?tracknum=TRACK-001' }] }],
      transactions: [{ id: 71001, kind: 'SALE', status: 'SUCCESS', gateway: 'shopify_payments', amountCents: 12_000 }],
    }),
    order({
      id: 450789469, name: '#1001', email: 'sam.rivera@example.com', phone: '+15555550142',
      displayFinancialStatus: 'PAID', displayFulfillmentStatus: 'FULFILLED', totalCents: 19_900,
      createdAt: '2026-05-20T08:00:00Z',
      customer: { firstName: 'Sam', lastName: 'Rivera', email: 'sam.rivera@example.com', phone: '+15555550142' },
      shippingAddress: { ...SPRINGFIELD },
      lineItems: [{ id: 66010, name: 'Summit Rain Jacket - L / Green', title: 'Summit Rain Jacket', sku: 'SRJ-L-GRN', quantity: 1, priceCents: 19_900 }],
      fulfillments: [{ status: 'SUCCESS', tracking: [{ number: '1Z999AA10123456784', company: 'UPS', url: null }] }],
      transactions: [
        { id: 389404460, kind: 'AUTHORIZATION', status: 'SUCCESS', gateway: 'bogus', amountCents: 19_900 },
        { id: 389404469, kind: 'CAPTURE', status: 'SUCCESS', gateway: 'bogus', amountCents: 19_900, parentId: 389404460 },
      ],
    }),
    order({
      id: 1001, name: '#1043', email: 'li.wei@example.com', phone: null,
      displayFinancialStatus: 'PAID', displayFulfillmentStatus: 'UNFULFILLED', totalCents: 4_500,
      createdAt: '2026-07-01T12:00:00Z',
      customer: { firstName: 'Li', lastName: 'Wei', email: 'li.wei@example.com', phone: null },
      shippingAddress: { ...SF, name: 'Li Wei', address2: null, phone: null },
      lineItems: [{ id: 66020, name: 'Trail Cap - One size', title: 'Trail Cap', sku: 'CAP-OS', quantity: 1, priceCents: 4_500 }],
      fulfillments: [],
      transactions: [{ id: 71020, kind: 'SALE', status: 'SUCCESS', gateway: 'shopify_payments', amountCents: 4_500 }],
    }),
    order({
      id: 1002, name: '#1044', email: 'ana.silva@example.com', phone: '+15555550177',
      displayFinancialStatus: 'PARTIALLY_REFUNDED', displayFulfillmentStatus: 'PARTIALLY_FULFILLED', totalCents: 8_000,
      createdAt: '2026-06-20T09:30:00Z',
      customer: { firstName: 'Ana', lastName: 'Silva', email: 'ana.silva@example.com', phone: '+15555550177' },
      shippingAddress: { ...SPRINGFIELD, name: 'Ana Silva' },
      lineItems: [
        { id: 66030, name: 'Trekking Pole', title: 'Trekking Pole', sku: 'POLE-1', quantity: 2, priceCents: 3_000 },
        { id: 66031, name: 'Water Bottle 1L', title: 'Water Bottle', sku: 'BTL-1L', quantity: 1, priceCents: 2_000 },
      ],
      fulfillments: [{ status: 'SUCCESS', tracking: [{ number: 'TRACK-002', company: 'USPS', url: null }] }],
      transactions: [
        { id: 71030, kind: 'SALE', status: 'SUCCESS', gateway: 'shopify_payments', amountCents: 8_000 },
        { id: 71031, kind: 'REFUND', status: 'SUCCESS', gateway: 'shopify_payments', amountCents: 2_000, parentId: 71030 },
      ],
      refunds: [{ id: 880001, note: 'Bottle arrived dented', amountCents: 2_000, createdAt: '2026-06-25T11:00:00Z', transactionIds: [71031] }],
    }),
    order({
      id: 1003, name: '#1045', email: null, phone: null,
      displayFinancialStatus: 'REFUNDED', displayFulfillmentStatus: 'UNFULFILLED', totalCents: 2_500,
      createdAt: '2026-06-28T16:45:00Z', customer: null, shippingAddress: null,
      lineItems: [{ id: 66040, name: 'Gift Card', title: 'Gift Card', sku: null, quantity: 1, priceCents: 2_500 }],
      fulfillments: [],
      transactions: [
        { id: 71040, kind: 'SALE', status: 'SUCCESS', gateway: 'manual', amountCents: 2_500 },
        { id: 71041, kind: 'REFUND', status: 'SUCCESS', gateway: 'manual', amountCents: 2_500, parentId: 71040 },
      ],
      refunds: [{ id: 880002, note: null, amountCents: 2_500, createdAt: '2026-06-29T10:00:00Z', transactionIds: [71041] }],
    }),
    order({
      // A multi-currency order: the shop sells in USD, the customer paid in EUR.
      // Refunds name the presentment currency (VENDORS.md §1.8, RefundInput.currency).
      id: 1004, name: '#1046', email: 'lena.vogel@example.com', phone: null,
      displayFinancialStatus: 'PAID', displayFulfillmentStatus: 'FULFILLED', totalCents: 5_000,
      presentmentCurrencyCode: 'EUR', shopPerPresentment: 1.08,
      createdAt: '2026-07-03T09:00:00Z',
      customer: { firstName: 'Lena', lastName: 'Vogel', email: 'lena.vogel@example.com', phone: null },
      shippingAddress: { ...SF, name: 'Lena Vogel', address2: null, phone: null },
      lineItems: [{ id: 66050, name: 'Merino Running Socks - L', title: 'Merino Running Socks', sku: 'MRS-L', quantity: 2, priceCents: 2_500 }],
      fulfillments: [{ status: 'SUCCESS', tracking: [{ number: 'TRACK-004', company: 'DHL', url: null }] }],
      transactions: [{ id: 71050, kind: 'SALE', status: 'SUCCESS', gateway: 'shopify_payments', amountCents: 5_000 }],
    }),
    order({
      // Split tender: part paid with a gift card, booked first as Shopify does, the rest by card.
      id: 1005, name: '#1047', email: 'omar.haddad@example.com', phone: null,
      displayFinancialStatus: 'PAID', displayFulfillmentStatus: 'FULFILLED', totalCents: 4_500,
      createdAt: '2026-07-05T14:20:00Z',
      customer: { firstName: 'Omar', lastName: 'Haddad', email: 'omar.haddad@example.com', phone: null },
      shippingAddress: { ...SPRINGFIELD, name: 'Omar Haddad', phone: null },
      lineItems: [{ id: 66060, name: 'Trail Cap - One size', title: 'Trail Cap', sku: 'CAP-OS', quantity: 1, priceCents: 4_500 }],
      fulfillments: [{ status: 'SUCCESS', tracking: [{ number: 'TRACK-005', company: 'UPS', url: null }] }],
      transactions: [
        { id: 71060, kind: 'SALE', status: 'SUCCESS', gateway: 'gift_card', amountCents: 1_000 },
        { id: 71061, kind: 'SALE', status: 'SUCCESS', gateway: 'shopify_payments', amountCents: 3_500 },
      ],
    }),
    order({
      // Paid in Kuwaiti dinars, a currency of 3 decimals (ISO 4217): amounts in fils, 45.250 KWD.
      id: 1006, name: '#1048', email: 'yousef.alsabah@example.com', phone: null,
      displayFinancialStatus: 'PAID', displayFulfillmentStatus: 'FULFILLED', totalCents: 45_250,
      presentmentCurrencyCode: 'KWD', shopPerPresentment: 3.25,
      createdAt: '2026-07-06T08:30:00Z',
      customer: { firstName: 'Yousef', lastName: 'Al-Sabah', email: 'yousef.alsabah@example.com', phone: null },
      shippingAddress: null,
      lineItems: [{ id: 66070, name: 'Summit Rain Jacket - M / Green', title: 'Summit Rain Jacket', sku: 'SRJ-M-GRN', quantity: 1, priceCents: 45_250 }],
      fulfillments: [{ status: 'SUCCESS', tracking: [{ number: 'TRACK-006', company: 'DHL', url: null }] }],
      transactions: [{ id: 71070, kind: 'SALE', status: 'SUCCESS', gateway: 'shopify_payments', amountCents: 45_250 }],
    }),
    order({
      // Paid in yen, a currency without decimals: amounts in whole yen, 12000 JPY.
      id: 1007, name: '#1049', email: 'haruto.sato@example.com', phone: null,
      displayFinancialStatus: 'PAID', displayFulfillmentStatus: 'FULFILLED', totalCents: 12_000,
      presentmentCurrencyCode: 'JPY', shopPerPresentment: 0.0067,
      createdAt: '2026-07-07T02:00:00Z',
      customer: { firstName: 'Haruto', lastName: 'Sato', email: 'haruto.sato@example.com', phone: null },
      shippingAddress: null,
      lineItems: [{ id: 66080, name: 'Trail Cap - One size', title: 'Trail Cap', sku: 'CAP-OS', quantity: 2, priceCents: 6_000 }],
      fulfillments: [{ status: 'SUCCESS', tracking: [{ number: 'TRACK-007', company: 'Yamato', url: null }] }],
      transactions: [{ id: 71080, kind: 'SALE', status: 'SUCCESS', gateway: 'shopify_payments', amountCents: 12_000 }],
    }),
    order({
      // A wholesale order of 55 lines, one cap each: more line items than the gateway reads (SHOPIFY_LONG_ORDER).
      id: SHOPIFY_LONG_ORDER.id, name: '#1050', email: 'ops@trailhead-outfitters.example.com', phone: null,
      displayFinancialStatus: 'PAID', displayFulfillmentStatus: 'UNFULFILLED', totalCents: SHOPIFY_LONG_ORDER.lineItems * 1_000,
      createdAt: '2026-07-08T07:30:00Z',
      customer: { firstName: 'Trailhead', lastName: 'Outfitters', email: 'ops@trailhead-outfitters.example.com', phone: null },
      shippingAddress: null,
      lineItems: Array.from({ length: SHOPIFY_LONG_ORDER.lineItems }, (_, i) => ({
        id: 66100 + i, name: `Trail Cap - Team ${i + 1}`, title: 'Trail Cap', sku: `CAP-T${String(i + 1).padStart(2, '0')}`, quantity: 1, priceCents: 1_000,
      })),
      fulfillments: [],
      transactions: [{ id: 71100, kind: 'SALE', status: 'SUCCESS', gateway: 'shopify_payments', amountCents: SHOPIFY_LONG_ORDER.lineItems * 1_000 }],
    }),
  ];
  return new Map(orders.map((o) => [o.id, o]));
}

export function seedShopifyProducts(): Map<number, EmuProduct> {
  const products: EmuProduct[] = [
    {
      id: 632910392, title: 'Aurora Trail Running Shoe', handle: 'aurora-trail-running-shoe', status: 'ACTIVE',
      vendor: 'Aurora', productType: 'Shoes', totalInventory: 42,
      variants: [
        { id: 808950810, title: '9 / Blue', sku: 'AUR-9-BLU', priceCents: 9_000, inventoryQuantity: 20 },
        { id: 808950811, title: '10 / Blue', sku: 'AUR-10-BLU', priceCents: 9_000, inventoryQuantity: 22 },
      ],
    },
    {
      id: 921728736, title: 'Summit Rain Jacket', handle: 'summit-rain-jacket', status: 'ACTIVE',
      vendor: 'Summit', productType: 'Outerwear', totalInventory: 7,
      variants: [{ id: 457924702, title: 'L / Green', sku: 'SRJ-L-GRN', priceCents: 19_900, inventoryQuantity: 7 }],
    },
    {
      id: 108828309, title: 'Trail Cap', handle: 'trail-cap', status: 'DRAFT',
      vendor: 'Aurora', productType: 'Accessories', totalInventory: 0,
      variants: [{ id: 457924710, title: 'One size', sku: 'CAP-OS', priceCents: 4_500, inventoryQuantity: 0 }],
    },
    {
      // Non-ASCII text of every UTF-8 width (2, 3 and 4 bytes), long enough that
      // a small result budget has to cut inside it (result-budget tests).
      id: 733000001, title: 'Tasse « Crème brûlée » – 抹茶碗 🍵'.repeat(12), handle: 'tasse-creme-brulee', status: 'ACTIVE',
      vendor: 'Kyōto Céramique', productType: 'Céramique', totalInventory: 3,
      variants: [{ id: 457924720, title: 'Ø 12 cm – 白', sku: 'TASSE-12', priceCents: 3_900, inventoryQuantity: 3 }],
    },
    {
      // More variants than the gateway reads (SHOPIFY_MANY_VARIANTS_PRODUCT): 60 sizes, one in stock each.
      id: SHOPIFY_MANY_VARIANTS_PRODUCT.id, title: 'Aurora Road Shoe', handle: 'aurora-road-shoe', status: 'ACTIVE',
      vendor: 'Aurora', productType: 'Shoes', totalInventory: SHOPIFY_MANY_VARIANTS_PRODUCT.variants,
      variants: Array.from({ length: SHOPIFY_MANY_VARIANTS_PRODUCT.variants }, (_, i) => ({
        id: 458000100 + i, title: `Size ${i + 1}`, sku: `ARS-${String(i + 1).padStart(2, '0')}`, priceCents: 11_000, inventoryQuantity: 1,
      })),
    },
  ];
  return new Map(products.map((p) => [p.id, p]));
}
