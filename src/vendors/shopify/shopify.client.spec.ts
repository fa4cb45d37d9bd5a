import { describe, expect, it } from 'vitest';
import { errorCodeFor } from '../../executor/failure-mapping.js';
import type { VendorHttpResponse } from '../http/vendor-http.js';
import { interpretShopifyResponse } from './shopify.client.js';

const WRITE = { sideEffect: 'write' as const, overwrite: false };

const answer = (body: unknown, status = 200): VendorHttpResponse => {
  const buf = Buffer.from(JSON.stringify(body));
  return { status, headers: { 'content-type': 'application/json' }, body: buf, text: () => buf.toString(), json: () => JSON.parse(buf.toString()) as unknown };
};
const fieldError = { message: 'Internal error resolving field', path: ['refundCreate', 'refund', 'transactions'], extensions: { code: 'INTERNAL_SERVER_ERROR' } };
const refund = { id: 'gid://shopify/Refund/1', totalRefundedSet: { shopMoney: { amount: '1.00', currencyCode: 'EUR' } } };

describe('interpretShopifyResponse: top-level errors beside a mutation payload (VENDORS.md §1.4, data possibly partial)', () => {
  it('a mutation whose payload came back ran: the payload goes to the handler, whatever else errored', () => {
    const res = interpretShopifyResponse(answer({ data: { refundCreate: { refund, userErrors: [] } }, errors: [fieldError] }), 'refundCreate');
    expect(res).toEqual({ ok: true, data: { refundCreate: { refund, userErrors: [] } }, vendorStatus: 200 });
  });

  it('a mutation that did not run (no payload, or null) is still the failure the errors say', () => {
    for (const data of [null, {}, { refundCreate: null }]) {
      const res = interpretShopifyResponse(answer({ data, errors: [{ message: 'Throttled', extensions: { code: 'THROTTLED' } }] }), 'refundCreate');
      expect(res.ok, JSON.stringify(data)).toBe(false);
      if (!res.ok) expect(res.kind).toBe('rate_limited');
    }
  });

  it('a query with partial data and errors is not taken for a success (only a named mutation is)', () => {
    const res = interpretShopifyResponse(answer({ data: { order: { id: 'gid://shopify/Order/1' } }, errors: [fieldError] }));
    expect(res.ok).toBe(false);
    const other = interpretShopifyResponse(answer({ data: { orderUpdate: { order: {} } }, errors: [fieldError] }), 'refundCreate');
    expect(other.ok).toBe(false);
  });

  it('a refund whose own payload errored away (refund null, no userErrors) is an unusable 2xx: unknown, never failed', () => {
    const res = interpretShopifyResponse(answer({ data: { refundCreate: { refund: null, userErrors: [] } }, errors: [fieldError] }), 'refundCreate');
    expect(res.ok).toBe(true); // the handler then finds no refund: bad_response at 200 …
    expect(errorCodeFor({ ok: false, kind: 'bad_response', vendorStatus: 200, requestSent: true, message: 'm' }, WRITE)).toBe('OUTCOME_UNKNOWN'); // … which a write reports as unknown
  });
});
