import { describe, expect, it } from 'vitest';
import { INCLUDED_DATA, normaliseOrderItemV2026, normaliseOrderV2026 } from './orders-v2026.normalise.js';

/**
 * The getOrder 200 example of orders_2026-01-01.json (amzn/selling-partner-api-models),
 * trimmed to the fields the mapping reads plus a few it must ignore.
 */
const MODEL_EXAMPLE = {
  orderId: '202-1234567-8901234',
  createdTime: '2024-12-25T09:15:00Z',
  lastUpdatedTime: '2024-12-25T16:30:00Z',
  programs: ['PRIME'],
  salesChannel: { channelName: 'AMAZON', marketplaceId: 'A1F83G8C2ARO7P', marketplaceName: 'Amazon.co.uk' },
  buyer: { buyerName: 'James Wilson', buyerEmail: 'buyer-email@marketplace.amazon.co.uk' },
  recipient: {
    deliveryAddress: {
      name: 'James Wilson',
      companyName: 'Wilson Electronics Ltd',
      addressLine1: '123 High Street',
      addressLine2: 'Unit 4B',
      addressLine3: '',
      city: 'Manchester',
      districtOrCounty: 'Greater Manchester',
      stateOrRegion: 'England',
      municipality: '',
      postalCode: 'M1 2AB',
      countryCode: 'GB',
      phone: '+44 161 123 4567',
      addressType: 'COMMERCIAL',
    },
    deliveryPreference: { dropOffLocation: 'Front desk reception' },
  },
  proceeds: {
    grandTotal: { amount: '103.97', currencyCode: 'GBP' },
    breakdowns: [{ type: 'ITEM', subtotal: { amount: '89.97', currencyCode: 'GBP' } }],
  },
  fulfillment: { fulfillmentStatus: 'SHIPPED', fulfilledBy: 'MERCHANT', fulfillmentServiceLevel: 'STANDARD' },
  orderItems: [
    {
      orderItemId: '20212345678901',
      quantityOrdered: 3,
      product: {
        asin: 'B08DFPV54V',
        title: 'Echo Dot (4th Gen) | Smart speaker with Alexa | Charcoal',
        sellerSku: 'ECHO-DOT-4-UK-CHARCOAL-3PACK',
        price: { unitPrice: { amount: '29.99', currencyCode: 'GBP' }, priceDesignation: 'BUSINESS_PRICE' },
      },
      proceeds: {
        proceedsTotal: { amount: '103.97', currencyCode: 'GBP' },
        breakdowns: [
          { type: 'SHIPPING', subtotal: { amount: '10.00', currencyCode: 'GBP' } },
          { type: 'ITEM', subtotal: { amount: '89.97', currencyCode: 'GBP' } },
          { type: 'TAX', subtotal: { amount: '4.00', currencyCode: 'GBP' } },
        ],
      },
      fulfillment: { quantityFulfilled: 3, quantityUnfulfilled: 0 },
    },
  ],
};

describe('Orders v2026-01-01 order → the v0-shaped AmazonOrder', () => {
  it('maps the model example field by field, in v0 spelling, keeping only what v0 gives without an RDT', () => {
    expect(normaliseOrderV2026('202-1234567-8901234', MODEL_EXAMPLE)).toEqual({
      orderId: '202-1234567-8901234',
      status: 'Shipped',
      purchaseDate: '2024-12-25T09:15:00Z',
      fulfillmentChannel: 'MFN',
      orderTotal: { currency: 'GBP', amount: '103.97' },
      buyerEmail: 'buyer-email@marketplace.amazon.co.uk',
      // No name, company, street lines, phone, county or address type: v0 getOrder without an RDT has none (VENDORS.md §2.2).
      shippingAddress: { City: 'Manchester', StateOrRegion: 'England', PostalCode: 'M1 2AB', CountryCode: 'GB' },
    });
  });

  it('every FulfillmentStatus comes back as the v0 OrderStatus (CANCELLED → Canceled, one L)', () => {
    const statusOf = (fulfillmentStatus: unknown) => normaliseOrderV2026('x', { ...MODEL_EXAMPLE, fulfillment: { fulfillmentStatus } }).status;
    expect(
      ['PENDING_AVAILABILITY', 'PENDING', 'UNSHIPPED', 'PARTIALLY_SHIPPED', 'SHIPPED', 'CANCELLED', 'UNFULFILLABLE'].map(statusOf),
    ).toEqual(['PendingAvailability', 'Pending', 'Unshipped', 'PartiallyShipped', 'Shipped', 'Canceled', 'Unfulfillable']);
    // A value the model does not list yet is passed on, not hidden; a prototype key is not a table entry.
    expect(statusOf('ON_HOLD')).toBe('ON_HOLD');
    expect(statusOf('constructor')).toBe('constructor');
    expect(statusOf(7)).toBeNull();
  });

  it('fulfilledBy → v0 FulfillmentChannel: MERCHANT → MFN, AMAZON → AFN', () => {
    const channelOf = (fulfilledBy: string) => normaliseOrderV2026('x', { ...MODEL_EXAMPLE, fulfillment: { fulfillmentStatus: 'SHIPPED', fulfilledBy } }).fulfillmentChannel;
    expect([channelOf('MERCHANT'), channelOf('AMAZON')]).toEqual(['MFN', 'AFN']);
  });

  it('datasets that were not included (or withheld) give nulls, never a guess', () => {
    const bare = { orderId: '202-1234567-8901234', createdTime: '2024-12-25T09:15:00Z', lastUpdatedTime: 'x', salesChannel: { channelName: 'AMAZON' }, orderItems: [] };
    expect(normaliseOrderV2026('202-1234567-8901234', bare)).toEqual({
      orderId: '202-1234567-8901234', status: null, purchaseDate: '2024-12-25T09:15:00Z', fulfillmentChannel: null, orderTotal: null, buyerEmail: null, shippingAddress: null,
    });
    // Money needs both amount and currencyCode (required in the model).
    expect(normaliseOrderV2026('x', { ...MODEL_EXAMPLE, proceeds: { grandTotal: { amount: '1.00' } } }).orderTotal).toBeNull();
    // orderId falls back to the one asked for.
    expect(normaliseOrderV2026('111-1111111-1111111', {}).orderId).toBe('111-1111111-1111111');
  });

  it('the address keeps only City/StateOrRegion/PostalCode/CountryCode: restricted parts, Brazil extendedFields, unknown keys and non-strings are dropped', () => {
    const deliveryAddress = {
      name: 'Carlos Oliveira',
      companyName: 'Oliveira Ltda',
      addressLine1: 'Avenida Paulista 1000',
      addressLine2: 'Sala 301',
      addressLine3: 'Bela Vista',
      phone: '+55 11 5555-0100',
      districtOrCounty: 'Bela Vista',
      municipality: 'São Paulo',
      postalCode: '01310-100',
      countryCode: 'BR',
      extendedFields: { streetName: 'Avenida Paulista', streetNumber: '1000', complement: 'Sala 301', neighborhood: 'Bela Vista' },
      addressType: 'PICKUP_POINT',
      latitude: 12.5,
      notAModelField: 'x',
      city: { nested: true },
    };
    expect(normaliseOrderV2026('x', { recipient: { deliveryAddress } }).shippingAddress).toEqual({ PostalCode: '01310-100', CountryCode: 'BR' });
  });

  it('never returns the buyer name the BUYER dataset carries, only the anonymised email (as v0 without an RDT)', () => {
    const out = normaliseOrderV2026('x', MODEL_EXAMPLE);
    expect(out.buyerEmail).toBe('buyer-email@marketplace.amazon.co.uk');
    expect(JSON.stringify(out)).not.toMatch(/James|Wilson|High Street|161 123/);
  });
});

describe('Orders v2026-01-01 orderItems[] → the v0-shaped AmazonOrderItem', () => {
  it('maps the model example: itemPrice is the ITEM proceeds (price × quantity, like v0 ItemPrice), not the unit price', () => {
    expect(normaliseOrderItemV2026(MODEL_EXAMPLE.orderItems[0])).toEqual({
      asin: 'B08DFPV54V',
      sku: 'ECHO-DOT-4-UK-CHARCOAL-3PACK',
      title: 'Echo Dot (4th Gen) | Smart speaker with Alexa | Charcoal',
      quantityOrdered: 3,
      quantityShipped: 3,
      itemPrice: { currency: 'GBP', amount: '89.97' },
    });
  });

  it('without PROCEEDS or FULFILLMENT data the price and shipped quantity are null; a non-object item is all nulls', () => {
    const { proceeds: _p, fulfillment: _f, ...bare } = MODEL_EXAMPLE.orderItems[0];
    expect(normaliseOrderItemV2026(bare)).toMatchObject({ asin: 'B08DFPV54V', quantityOrdered: 3, quantityShipped: null, itemPrice: null });
    const noItemLine = { ...bare, proceeds: { breakdowns: [{ type: 'TAX', subtotal: { amount: '4.00', currencyCode: 'GBP' } }] } };
    expect(normaliseOrderItemV2026(noItemLine).itemPrice).toBeNull();
    expect(normaliseOrderItemV2026('junk')).toEqual({ asin: null, sku: null, title: null, quantityOrdered: null, quantityShipped: null, itemPrice: null });
  });
});

describe('includedData', () => {
  const MODEL_ENUM = ['BUYER', 'RECIPIENT', 'PROCEEDS', 'EXPENSE', 'PROMOTION', 'CANCELLATION', 'FULFILLMENT', 'PACKAGES', 'TAX', 'PAYMENT', 'FULFILLMENT_ORDERS'];

  it('asks only for datasets in the model enum, and for buyer / recipient only where the result returns their unrestricted parts', () => {
    for (const sets of Object.values(INCLUDED_DATA)) for (const s of sets) expect(MODEL_ENUM).toContain(s);
    expect([...INCLUDED_DATA.get_order].sort()).toEqual(['BUYER', 'FULFILLMENT', 'PROCEEDS', 'RECIPIENT']);
    expect([...INCLUDED_DATA.get_order_items].sort()).toEqual(['FULFILLMENT', 'PROCEEDS']);
  });
});
