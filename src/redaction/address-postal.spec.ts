/**
 * Pinned after a mutation review found nothing did: passes on this code and fails on the mutant
 * value-walker.ts:236 `typeof postal === 'string' ? this.text(postal, key) : …` → `… ? postal : …`.
 * An address keeps its postal code only, but that string is still scanned like any other text: a secret or a card
 * number a vendor (or a hostile customer) put in the zip field must not reach the ledger raw.
 */
import { describe, expect, it } from 'vitest';
import { redactOutput } from './redaction.service.js';

describe('output walker: the postal code an address keeps is still scanned', () => {
  it('a provider token or a card number in an address zip is redacted; a real zip is kept', () => {
    const token = 'shpat_0123456789abcdef0123456789abcdef';
    const out = JSON.stringify(redactOutput({ shipping_address: { address1: '1 Main St', city: 'Springfield', zip: `token ${token}` } }));
    expect(out).not.toContain(token);
    const card = JSON.stringify(redactOutput({ billing_address: { address1: '2 Side St', zip: '4111 1111 1111 1111' } }));
    expect(card).not.toContain('4111 1111 1111 1111');
    expect(redactOutput({ shipping_address: { address1: '1 Main St', zip: '90210' } })).toEqual({ shipping_address: { zip: '90210' } });
  });
});
