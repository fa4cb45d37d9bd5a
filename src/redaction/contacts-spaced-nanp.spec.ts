/**
 * A North American phone written with single spaces (415 555 2671) is as much a phone as 415-555-2671: output
 * redaction takes it too, and still leaves the other runs of spaced digits (cards, accounts, amounts, dates).
 */
import { describe, expect, it } from 'vitest';
import { redactContactsInText } from './contacts-in-text.js';
import { expectNoWorseThanProse } from './cost.spec-support.js';
import { REDACTED } from './markers.js';
import { redactInput, redactOutput } from './redaction.service.js';

describe('redactContactsInText: a NANP phone with single spaces', () => {
  it.each([
    ['in an order note', 'call 415 555 2671 before delivery', `call ${REDACTED} before delivery`],
    ['with its country code 1', 'call 1 415 555 2671 today', `call ${REDACTED} today`],
    ['at the end of a sentence', 'Reach me on 415 555 2671.', `Reach me on ${REDACTED}.`],
    ['between brackets', 'buzzer (415 555 2671)', `buzzer (${REDACTED})`],
    ['in JSON inside a string', '{"note":"415 555 2671"}', `{"note":"${REDACTED}"}`],
    ['two of them', '415 555 2671 or 212 555 0199', `${REDACTED} or ${REDACTED}`],
    ['percent-encoded', '/c?note=415%20555%202671', `/c?note=${REDACTED}`],
  ])('redacts it %s', (_what, text, expected) => {
    expect(redactContactsInText(text)).toBe(expected);
  });

  it.each([
    ['a card in groups', 'card 4111 1111 1111 1111'],
    ['a longer run of groups', 'acct 200 555 1234 5678'],
    ['a group after another', 'ref 12 415 555 2671'],
    ['an area code starting with 1', '155 555 2671'],
    ['an area code starting with 0', '015 555 2671'],
    ['groups of other sizes', '4155 552 671'],
    ['an ISO date and time', '2026-08-02 14:05:11'],
    ['a date written with spaces', '2026 08 02'],
    ['money amounts', 'total 415 555.00 USD, 1 234 567,89 EUR'],
    ['an order number and a quantity', 'order #1001 qty 250 sku 555 2671'],
    ['a quantity list', 'sizes 10 20 300 and 1234 56 7890 12'],
    ['digits glued to a word', 'x415 555 2671'],
    ['a decimal after it', '415 555 2671.5'],
    ['a spaced SSN', '219 09 9999'],
  ])('keeps %s', (_what, text) => {
    expect(redactContactsInText(text)).toBe(text);
  });

  it('output loses it, input (secrets only) keeps it, as the dashed form', () => {
    expect(redactOutput({ note: 'call 415 555 2671 before delivery' })).toEqual({ note: `call ${REDACTED} before delivery` });
    expect(redactOutput('call 415-555-2671 before delivery')).toBe(`call ${REDACTED} before delivery`);
    expect(redactInput({ note: 'call 415 555 2671 before delivery' })).toEqual({ note: 'call 415 555 2671 before delivery' });
  });

  it('runs of spaced digit groups cost about what prose does', () => {
    const hostile = ['415 555 '.repeat(12_500), '1 415 '.repeat(16_000), '415 555 2671 '.repeat(7_500), '2'.repeat(100_000), '222 '.repeat(25_000)];
    expectNoWorseThanProse(hostile, redactContactsInText);
  });
});
