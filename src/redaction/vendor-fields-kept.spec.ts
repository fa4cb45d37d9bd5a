import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { REDACTED } from './markers.js';
import { redactInput, redactOutput } from './redaction.service.js';

/**
 * Vendor values that are no secret and no personal data, shown as written in the ledger (found by a review of what
 * redaction cut, 20,000 samples a shape): a Shopify REST id before ".json" and a German maker's EAN-13 were taken for
 * 13-digit Visa numbers one time in ten; a SKU or a reference with a tax id's digit groups after its prefix, a product
 * called "Ring Bearer …", and a payment authorization's expiry were cut every time. Each still hides what it must.
 */
const digits = (n: number) => fc.array(fc.integer({ min: 0, max: 9 }), { minLength: n, maxLength: n }).map((a) => a.join(''));
const productId = digits(12).map((d) => `4${d}`);
const variantId = fc.tuple(fc.constantFrom('36', '38', '39'), digits(12)).map(([a, b]) => a + b);
const ean13 = fc.tuple(fc.integer({ min: 400, max: 440 }), digits(9)).map(([p, d]) => {
  const s = `${p}${d}`;
  let sum = 0;
  for (let i = 0; i < 12; i++) sum += Number(s[i]) * (i % 2 ? 3 : 1);
  return s + ((10 - (sum % 10)) % 10);
});
const runs = { seed: 20261207, numRuns: 1_000 };

describe('Shopify REST paths keep the id before ".json"', () => {
  it('products and variants (property)', () => {
    fc.assert(
      fc.property(productId, variantId, (product, variant) => {
        for (const path of [`/admin/api/2026-07/products/${product}.json`, `admin/api/2026-07/variants/${variant}.json?fields=id,price`]) {
          expect(redactInput({ path })).toEqual({ path });
        }
      }),
      runs,
    );
  });

  it('a card in the rest of a segment still goes', () => {
    expect(redactInput({ path: '/orders/123.json?note=4111111111111111' })).toEqual({ path: `/orders/123.json?note=${REDACTED}` });
    expect(redactInput({ path: '/cards/4111111111111111.jsonp' })).toEqual({ path: `/cards/${REDACTED}.jsonp` });
  });
});

describe('product codes under their names', () => {
  it('an SP-API catalog EAN-13, in the answer and in the query (property)', () => {
    fc.assert(
      fc.property(ean13, (ean) => {
        const answer = { identifiers: [{ marketplaceId: 'A1PA6795UKMFR9', identifiers: [{ identifierType: 'EAN', identifier: ean }] }] };
        expect(redactOutput(answer)).toEqual(answer);
        const query = { identifiers: ean, identifiersType: 'EAN' };
        expect(redactInput({ query })).toEqual({ query });
        for (const key of ['ean', 'gtin', 'upc', 'isbn13']) expect(redactOutput({ [key]: ean })).toEqual({ [key]: ean });
      }),
      runs,
    );
  });

  it('a card under any other name still goes', () => {
    expect(redactOutput({ note: '4222222222222' })).toEqual({ note: REDACTED }); // a 13-digit Visa
    expect(redactOutput({ identifierNote: 'card 4111 1111 1111 1111' })).toEqual({ identifierNote: `card ${REDACTED}` });
  });
});

describe("a tax id's digit groups after a word and a dash", () => {
  it('SKUs and references are kept (property)', () => {
    fc.assert(
      fc.property(digits(3), digits(2), digits(4), digits(7), (a, b, c, d) => {
        const value = { sku: `TSH-${a}-${b}-${c}`, SellerSKU: `TSH-${a}-${b}-${c}`, note: `see INV-${b}-${d}` };
        expect(redactOutput(value)).toEqual(value);
        expect(redactInput(value)).toEqual(value);
      }),
      { ...runs, numRuns: 200 },
    );
  });

  it('after the name of a tax id, or after nothing but a blank, they go', () => {
    for (const [text, out] of [
      ['SSN-123-45-6789', `SSN-${REDACTED}`],
      ['ein-12-3456789', `ein-${REDACTED}`],
      ['taxid-12-3456789', `taxid-${REDACTED}`],
      ['customer TIN-123-45-6789.', `customer TIN-${REDACTED}.`],
      ['ssn 123-45-6789', `ssn ${REDACTED}`],
      ['-12-3456789', `-${REDACTED}`],
    ]) {
      expect(redactInput(text), text).toBe(out);
    }
  });
});

describe('"Bearer" in prose', () => {
  it('product titles keep the word after it', () => {
    for (const title of ['Ring Bearer Suspenders - Navy', 'Personalized Ring Bearer Sweatshirt', 'Torch Bearer Collection', 'a bearer instrument']) {
      expect(redactOutput({ title }), title).toEqual({ title });
      expect(redactInput({ product: { title } }), title).toEqual({ product: { title } });
    }
  });

  it('tokens after it still go: digits, mixed case, longer than a word, anything past it', () => {
    for (const token of ['abcdefgh1234', 'AbCdEfGhIjKl', 'abcdefghijklmnopq', 'abcdefghij=', 'abc.def.ghi', 'Abcdefghij_k', 'ABCDEFGHIJ']) {
      expect(redactInput(`curl -H Bearer ${token} https://x`), token).toBe(`curl -H Bearer ${REDACTED} https://x`);
    }
    expect(redactInput('Authorization: Bearer Suspenders')).not.toContain('Suspenders');
  });
});

describe('the times of a secret', () => {
  it('a Shopify authorization transaction keeps when it expires (GraphQL and REST)', () => {
    const gql = { id: 'gid://shopify/OrderTransaction/389404469', kind: 'AUTHORIZATION', authorizationExpiresAt: '2026-08-09T14:05:11Z' };
    expect(redactOutput(gql)).toEqual(gql);
    const rest = {
      id: 389404469,
      kind: 'authorization',
      authorization_expires_at: '2026-08-09T14:05:11-04:00',
      extended_authorization_attributes: { standard_authorization_expires_at: '2026-08-09T14:05:11Z', extended_authorization_expires_at: '2026-09-01T14:05:11.250Z' },
    };
    expect(redactOutput(rest)).toEqual(rest);
    expect(redactInput(rest)).toEqual(rest);
    expect(redactOutput({ token_expires_at: 1_796_000_000, credential_created_at: '2026-01-02' })).toEqual({ token_expires_at: 1_796_000_000, credential_created_at: '2026-01-02' });
  });

  it('anything else under such a name still goes, as do the secrets themselves', () => {
    expect(redactOutput({ authorization_expires_at: 'shpat_0123456789abcdef0123456789abcdef' })).toEqual({ authorization_expires_at: REDACTED });
    expect(redactOutput({ token_expires_at: '2026-08-09 or ask' })).toEqual({ token_expires_at: REDACTED });
    expect(redactOutput({ token_at: { value: 'x' } })).toEqual({ token_at: REDACTED });
    expect(redactOutput({ extended_authorization_attributes: { authorization_code: 'A1B2C3', note: 'x' } })).toEqual({ extended_authorization_attributes: { authorization_code: REDACTED, note: 'x' } });
    expect(redactOutput({ extended_authorization_attributes: ['x'] })).toEqual({ extended_authorization_attributes: REDACTED });
    expect(redactOutput({ authorization: '2026-08-09', authorizationCode: '2026-08-09', access_token: 123 })).toEqual({ authorization: REDACTED, authorizationCode: REDACTED, access_token: REDACTED });
  });
});
