import { describe, expect, it } from 'vitest';
import { redactContactsInText } from './contacts-in-text.js';
import { REDACTED } from './markers.js';
import { redactSecretsInText } from './patterns.js';
import { redactCardNumbers } from './payment-numbers.js';
import { redactInput, redactOutput } from './redaction.service.js';
import { expectNoWorseThanProse } from './cost.spec-support.js';

/**
 * Contact details and card numbers written in ways the plain patterns missed: a phone with a long subscriber group,
 * an email or phone percent-encoded in a URL, a secret split by an invisible format character, a card in full-width
 * digits or with wider separators. And what those wider rules must still leave alone.
 */
const out = (value: unknown): string => JSON.stringify(redactOutput(value));
const inp = (value: unknown): string => JSON.stringify(redactInput(value));

describe('international phones whose groups after the country code hold 5 to 8 digits (output)', () => {
  it.each([
    ['UK mobile', '+44 7911 123456'],
    ['Germany landline', '+49 30 12345678'],
    ['Germany mobile', '+49 151 23456789'],
    ['Netherlands mobile', '+31 6 12345678'],
    ['India mobile', '+91 98765 43210'],
    ['Brazil mobile', '+55 11 91234-5678'],
    ['US subscriber number as one run', '+1 4155552671'],
    ['UK trunk zero in parentheses', '+44 (0) 7911 123456'],
    ['France, no-break spaces', '+33\u00a0612345678'],
  ])('%s %s', (_what, phone) => {
    expect(redactContactsInText(`please call me on ${phone} after 5pm`)).toBe(`please call me on ${REDACTED} after 5pm`);
    expect(out({ ticket: { description: `call ${phone}` } })).toBe(JSON.stringify({ ticket: { description: `call ${REDACTED}` } }));
  });

  it.each([
    '+1 206', // too few digits for a phone
    '+100.00',
    '+5.00 - 2.00',
    '+12,345.67',
    '+1 12345', // a score change and a count: 6 digits
    '+1 123456789012345678', // more digits than E.164 allows
    '2026-08-02T14:05:11+05:30',
    'version 2026.08.02',
    'order #1001 shipped, 112-0000001-1234567',
    'tracking 1Z999AA10123456784',
  ])('keeps %j', (text) => {
    expect(redactContactsInText(text)).toBe(text);
  });
});

describe('percent-encoded emails and phones in URLs (output)', () => {
  it('the query values that hold them go; the rest of the URL stays, and no decoded form is recorded', () => {
    const landing = '/?utm_source=mail&email=jane.doe%40example.com&phone=%2B14155552671';
    expect(redactOutput({ order: { landing_site: landing } })).toEqual({
      order: { landing_site: `/?utm_source=mail&email=${REDACTED}&phone=${REDACTED}` },
    });
  });

  it.each([
    ['lower-case escapes', 'https://shop.example/r?e=jane%40example.com&p=%2b1%20415%20555%202671', `https://shop.example/r?e=${REDACTED}&p=${REDACTED}`],
    ['form-encoded spaces', 'phone=%2B44+7911+123456', `phone=${REDACTED}`],
    ['a path segment', '/account/jane%40example.com/orders', `/account/${REDACTED}/orders`],
    ['a whole encoded return URL', 'return_to=%2F%3Femail%3Djane%40example.com%26x%3D1', `return_to=${REDACTED}`],
    ['beside a malformed escape', 'e=%E0%A4jane%40example.com%ZZ', `e=${REDACTED}`],
  ])('%s', (_what, text, expected) => {
    expect(redactContactsInText(text)).toBe(expected);
    expect(out({ referring_site: text })).not.toMatch(/jane|4155552671|7911/);
  });

  it.each([
    'q=c%2B%2B&lang=en',
    'created_at_min=2024-05-01T10%3A00%3A00%2B02%3A00',
    'sig=abc%2Bdef%2F%3D&offset=%2B3600',
    'sale=100%25&tag=%40home',
    'discount 100% off, 50%2 kept', // not escapes at all
    'text%40', // an encoded @ with nothing around it
  ])('keeps %j', (text) => {
    expect(redactContactsInText(text)).toBe(text);
  });

  it('input redaction does not look for contacts, encoded or not', () => {
    expect(redactInput({ url: '/?email=jane.doe%40example.com' })).toEqual({ url: '/?email=jane.doe%40example.com' });
  });
});

describe('secrets split by invisible format characters (Unicode Cf)', () => {
  it.each([
    ['Stripe key with U+200B', `sk_live_\u200b${'a1B2c3D4e5'.repeat(3)}`],
    ['GitHub token with U+00AD', 'ghp_abcdefghij\u00adklmnopqrstuvwxyz0123456789'],
    ['Stripe key with U+2060', `key sk_live_abcdefgh\u2060ijklmnopqrstuvwx`],
    ['card with U+200B between groups', '4111\u200b1111\u200b1111\u200b1111'],
    ['card with U+FEFF inside', '41111111\ufeff11111111'],
    ['card with U+200C and U+200D', 'pay 4111 1111\u200c 1111\u200d 1111 now'],
  ])('%s: the value is [REDACTED], input and output', (_what, text) => {
    expect(redactInput({ comment: text })).toEqual({ comment: REDACTED });
    expect(redactOutput({ comment: text })).toEqual({ comment: REDACTED });
  });

  it('an email split by U+200B is [REDACTED] in output', () => {
    expect(redactOutput({ note: 'mail jane.doe@exam\u200bple.com' })).toEqual({ note: REDACTED });
  });

  it.each([
    ['an emoji family (ZWJ)', 'thanks 👨\u200d👩\u200d👧 order 1001'],
    ['Hebrew with a right-to-left mark', 'הזמנה\u200f 1001'],
    ['a soft-hyphenated word', 'Donau\u00addampf\u00adschiff'],
    ['a BOM at the start', '\ufeffid,qty\n1001,2'],
    ['a flag emoji (tag characters)', 'from 🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}'],
  ])('%s is recorded as written', (_what, text) => {
    expect(redactInput({ note: text })).toEqual({ note: text });
    expect(redactOutput({ note: text })).toEqual({ note: text });
  });

  it('a secret redacted as written keeps the format characters elsewhere in the text', () => {
    expect(redactInput({ note: `see\u200b key sk_live_${'a1B2c3D4e5'.repeat(3)}` })).toEqual({ note: `see\u200b key ${REDACTED}` });
  });
});

describe('card numbers in full-width digits or with wider separators', () => {
  it.each([
    ['full-width digits', '４１１１ １１１１ １１１１ １１１１'],
    ['full-width, contiguous', '４１１１１１１１１１１１１１１１'],
    ['two spaces between groups', '4111  1111  1111  1111'],
    ['one group per line', 'card:\n4111\n1111\n1111\n1111'],
    ['CRLF between groups', '4111\r\n1111\r\n1111\r\n1111'],
    ['tab separated', '4111\t1111\t1111\t1111'],
    ['Amex with two spaces', '3782  822463  10005'],
  ])('%s', (_what, text) => {
    const redacted = redactCardNumbers(text);
    expect(redacted).toContain(REDACTED);
    expect(redacted.replace(/\D/g, '')).not.toMatch(/1111|822463/);
    expect(inp({ comment: text })).not.toMatch(/1111|１１１１|822463/);
  });

  it('full-width digits around a card are kept as written', () => {
    expect(redactCardNumbers('カード ４１１１ １１１１ １１１１ １１１１ 注文 １２３４５')).toBe(`カード ${REDACTED} 注文 １２３４５`);
  });

  it.each([
    '4111\n1111\n1111\n1112', // Luhn fails
    '１２３４ ５６７８ ９０１２ ３４５６', // Luhn fails, full-width
    'orders:\n5927413514539\n5927413514540', // Shopify order ids, one per line
    '112-0000001-1234567\t112-0000001-1234568',
    'qty  1001  1002  1003  1004',
    '１００１\t２',
    'gid://shopify/Order/5927413514539',
  ])('keeps %j', (text) => {
    expect(redactCardNumbers(text)).toBe(text);
    expect(redactSecretsInText(text, { cards: true })).toBe(text);
  });
});

describe('cost of the wider rules', () => {
  it('stays linear on hostile input', () => {
    const hostile = [
      '%40'.repeat(15_000),
      'a%40'.repeat(12_000),
      '%2B1 '.repeat(10_000),
      'x=%2B1&'.repeat(7_000),
      '+1 12345 '.repeat(5_000),
      '+44 (0) 12345678'.repeat(3_000),
      '1  '.repeat(15_000),
      '1\n'.repeat(25_000),
      '１ '.repeat(25_000),
      'sk_live_\u200b'.repeat(5_000),
      '4111\u200b'.repeat(10_000),
    ];
    expectNoWorseThanProse(hostile, (text) => {
      redactContactsInText(redactSecretsInText(text, { cards: true }));
      redactOutput({ note: text });
    });
  });
});
