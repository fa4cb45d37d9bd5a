import { describe, expect, it } from 'vitest';
import { redactInput, redactOutput } from './redaction.service.js';

/**
 * What reading numbers in other scripts' digits, Unicode dashes and blanks (unicode-forms.ts) must not change: a "00"
 * run that is no phone stays as written, its "00" included; an identifier holding a bare id in another script's digits
 * is exempt from the card scan as its ASCII twin is.
 */

/** A "00" + country code run too short to be a phone: the replacer once gave back the match without its "00". */
describe('PHONE_00 non-phone keeps its leading 00', () => {
  const cases = ['ref 0044 12 34', 'Preis 0049 12 34 €', 'ref 0044\u00a012\u00a034', 'ref ٠٠٤٤ ١٢ ٣٤'];
  for (const s of cases) {
    it(`output: ${JSON.stringify(s)} is unchanged`, () => {
      expect(redactOutput({ note: s })).toEqual({ note: s });
    });
  }
});

/** Under an identifier key (orderId, sku, tracking_number) a bare digit id that passes Luhn is not a card (value-walker.ts). */
const arabic = (s: string) => s.replace(/\d/g, (d) => String.fromCharCode(0x660 + Number(d)));
const id = '4111111111111111'; // passes Luhn

describe('identifier exemption for ids in other scripts\' digits', () => {
  it('ASCII id under orderId is kept (control)', () => {
    expect(redactInput({ orderId: id })).toEqual({ orderId: id });
  });
  it('Arabic-Indic id under orderId is kept in the input record', () => {
    expect(redactInput({ orderId: arabic(id) })).toEqual({ orderId: arabic(id) });
  });
  it('Arabic-Indic id under sku / tracking_number is kept in the output record', () => {
    const v = { sku: arabic(id), tracking_number: arabic(id) };
    expect(redactOutput(v)).toEqual(v);
  });
});

/**
 * A URL path's segments of bare digits name resources (nango_proxy's `path`): an id that passes Luhn is kept there too,
 * so an approver sees which user a write targets (two writes to two users were both shown "/v1/users/[REDACTED]/role").
 */
describe('a URL path: bare digit segments are ids, other secrets in it still hidden', () => {
  it('a Luhn-passing id as a whole segment is kept in the input record, not in vendor output', () => {
    const path = `/v1/users/${id}/role`;
    expect(redactInput({ path, body: { role: 'owner' } })).toEqual({ path, body: { role: 'owner' } });
    expect(redactOutput({ path })).toEqual({ path: '/v1/users/[REDACTED]/role' }); // vendor output: no approver reads it, a card is hidden
    expect(redactInput({ path: `/v1/users/${arabic(id)}` })).toEqual({ path: `/v1/users/${arabic(id)}` });
  });
  it('a card written inside a segment, with its groups, or outside a path, is still hidden; other secret shapes too', () => {
    expect(redactInput({ path: `/v1/cards/card-${id}` })).toEqual({ path: '/v1/cards/card-[REDACTED]' });
    expect(redactInput({ path: '/v1/cards/4111-1111-1111-1111/x' })).toEqual({ path: '/v1/cards/[REDACTED]/x' });
    expect(redactInput({ path: `v1/users/${id}` })).toEqual({ path: `v1/users/${id}` }); // Nango takes it without its "/" too
    expect(redactInput({ note: `/v1/users/${id}` })).toEqual({ note: '/v1/users/[REDACTED]' }); // only under `path`
    const jwt = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U';
    expect(redactInput({ path: `/v1/tokens/${jwt}` })).toEqual({ path: '/v1/tokens/[REDACTED]' });
  });
});
