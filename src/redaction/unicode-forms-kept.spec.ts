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
