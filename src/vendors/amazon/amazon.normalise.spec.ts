import { describe, expect, it } from 'vitest';
import { normaliseOrder } from './amazon.normalise.js';

describe('Orders v0 getOrder payload → AmazonOrder', () => {
  it('keeps only what getOrder gives without an RDT, even from a payload that carries the restricted parts (VENDORS.md §2.2)', () => {
    // The VENDORS.md §2.2 example (an answer made with an RDT), plus more restricted and unknown parts.
    const payload = {
      AmazonOrderId: '112-0000001-1234567',
      OrderStatus: 'Shipped',
      PurchaseDate: '2026-08-02T14:05:11Z',
      FulfillmentChannel: 'MFN',
      OrderTotal: { CurrencyCode: 'USD', Amount: '64.98' },
      BuyerInfo: { BuyerEmail: 'q4w8e2r6t0y3u7i1@marketplace.amazon.com', BuyerName: 'Marcus Webb', BuyerTaxInfo: { CompanyLegalName: 'Webb LLC' }, PurchaseOrderNumber: 'PO-1' },
      ShippingAddress: {
        Name: 'Marcus Webb',
        CompanyName: 'Webb LLC',
        AddressLine1: '1600 Fake Harbor Blvd',
        AddressLine2: 'Suite 2',
        AddressLine3: 'c/o Reception',
        City: 'Seattle',
        County: 'King',
        District: 'Downtown',
        StateOrRegion: 'WA',
        Municipality: 'Seattle',
        PostalCode: '98101-1234',
        CountryCode: 'US',
        Phone: '+1 206-555-0199',
        AddressType: 'Residential',
        ExtendedFields: { StreetName: 'Fake Harbor Blvd', StreetNumber: '1600' },
      },
    };
    const out = normaliseOrder('112-0000001-1234567', payload);
    expect(out.shippingAddress).toEqual({ City: 'Seattle', StateOrRegion: 'WA', PostalCode: '98101-1234', CountryCode: 'US' });
    expect(out.buyerEmail).toBe('q4w8e2r6t0y3u7i1@marketplace.amazon.com');
    expect(JSON.stringify(out)).not.toMatch(/Marcus|Webb|Fake Harbor|555-0199|PO-1|Residential|King/);
  });

  it('a non-string address part is dropped; no ShippingAddress (a Pending order) is null', () => {
    expect(normaliseOrder('x', { ShippingAddress: { City: { nested: true }, PostalCode: '97201' } }).shippingAddress).toEqual({ PostalCode: '97201' });
    expect(normaliseOrder('x', {}).shippingAddress).toBeNull();
  });
});
