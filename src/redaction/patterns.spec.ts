import { describe, expect, it } from 'vitest';
import { isCardNumber, luhnValid, REDACTED, redactCardNumbers, redactContactsInText, redactSecretsInText } from './patterns.js';

const secrets = (text: string): string => redactSecretsInText(text, { cards: true });

describe('luhnValid / isCardNumber', () => {
  it('accepts well-known test card numbers', () => {
    for (const n of ['4111111111111111', '5555555555554444', '378282246310005', '6011111111111117', '4222222222222', '2223003122003222', '3566002020360505', '30569309025904']) {
      expect(luhnValid(n)).toBe(true);
      expect(isCardNumber(n)).toBe(true);
    }
  });

  it('rejects bad check digits, wrong lengths and non-issuer first digits', () => {
    expect(isCardNumber('4111111111111112')).toBe(false);
    expect(isCardNumber('411111111111')).toBe(false); // 12 digits
    expect(isCardNumber('41111111111111111111')).toBe(false); // 20 digits
    expect(isCardNumber('1000000000000008')).toBe(false); // Luhn-valid, but no issuer starts with 1
    expect(luhnValid('1000000000000008')).toBe(true);
  });
});

describe('redactCardNumbers', () => {
  it.each([
    ['4111111111111111'],
    ['4111 1111 1111 1111'],
    ['4111-1111-1111-1111'],
    ['3782 822463 10005'],
    ['6011 0009 9013 9424'],
    ['4222222222222'],
  ])('redacts %s', (card) => {
    expect(redactCardNumbers(`pay with ${card} today`)).toBe(`pay with ${REDACTED} today`);
  });

  it('finds a card next to other numbers', () => {
    expect(redactCardNumbers('order 12 4111 1111 1111 1111 thanks')).toBe(`order 12 ${REDACTED} thanks`);
    expect(redactCardNumbers('2026-08-02 4111 1111 1111 1111')).toBe(`2026-08-02 ${REDACTED}`);
    expect(redactCardNumbers('4111111111111111,5555555555554444')).toBe(`${REDACTED},${REDACTED}`);
  });

  it.each([
    ['an invalid check digit', '4111 1111 1111 1112'],
    ['an Amazon order id', '112-0000001-1234567'],
    ['an Amazon order id that passes Luhn', '402-1234567-8901231'],
    ['a UPS tracking number', '1Z999AA10123456784'],
    ['a USPS tracking number', '9400111899223100000000'],
    ['an odd grouping', '41 11111 111111 111'],
    ['mixed separators', '4111-1111 1111-1111'],
    ['an amount', '100.00'],
    ['a date', '2026-08-02T14:05:11Z'],
    ['a short order id', '12345'],
  ])('keeps %s', (_what, text) => {
    expect(redactCardNumbers(text)).toBe(text);
  });

  it('the Amazon id in that case really is Luhn-valid (the grouping is what saves it)', () => {
    expect(isCardNumber('40212345678901231')).toBe(true);
  });
});

describe('redactSecretsInText', () => {
  it.each([
    ['a bearer token', 'Authorization: Bearer abcDEF123456.xyz', `Authorization: Bearer ${REDACTED}`],
    ['a lower-case bearer token', 'bearer sk-abcdefgh12345678', `bearer ${REDACTED}`],
    ['a JWT', 'token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk end', `token ${REDACTED} end`],
    ['a Shopify admin token', 'shpat_0123456789abcdef0123456789abcdef', REDACTED],
    ['a Shopify custom app token', 'x 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 y', `x ${REDACTED} y`],
    ['a Shopify private app token', 'shppa_0123456789abcdef0123456789abcdef', REDACTED],
    ['a Shopify shared secret', 'shpss_0123456789abcdef0123456789abcdef', REDACTED],
    ['an LWA access token', 'Atza|IwEBIOrtjG3-cMo0xXr8Ab_QwQ', REDACTED],
    ['an LWA refresh token', '"Atzr|IwEBIB-sSEjW9kZ0mGw"', `"${REDACTED}"`],
    ['a Stripe key', 'sk_live_51Habcdefghijklmn', REDACTED],
    ['an AWS key id', 'AKIAIOSFODNN7EXAMPLE', REDACTED],
    ['a US SSN', 'ssn 123-45-6789.', `ssn ${REDACTED}.`],
    ['an EIN', 'EIN: 12-3456789', `EIN: ${REDACTED}`],
    ['a card', 'card 4111 1111 1111 1111', `card ${REDACTED}`],
    ['a PEM private key', 'k=-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY-----!', `k=${REDACTED}!`],
    ['a cut PEM private key', '-----BEGIN PRIVATE KEY-----\nMIIabc', REDACTED],
  ])('redacts %s', (_what, text, expected) => {
    expect(secrets(text)).toBe(expected);
  });

  it.each([
    '12345',
    '112-0000001-1234567',
    '1Z999AA10123456784',
    '100.00',
    'shipped',
    '2026-08-02',
    '2026-08-02T14:05:11Z',
    'a1b2c3d4-0000-4c5d-8e9f-000000000003',
    'gid://shopify/Order/450789469',
    '#1001',
    'AUR-9-BLU',
    'Bearer',
    'the bearer of bad news',
    '123-45-67890',
    '1123-45-6789',
    '123-456-7890',
    'shpat_short',
    'Atz',
    'eyJ.not.a.token',
  ])('keeps %j', (text) => {
    expect(secrets(text)).toBe(text);
  });

  it('can leave card-like digits alone when asked', () => {
    expect(redactSecretsInText('4111111111111111', { cards: false })).toBe('4111111111111111');
  });
});

describe('redactContactsInText', () => {
  it.each([
    ['an email', 'mail jane.doe+shop@example.co.uk now', `mail ${REDACTED} now`],
    ['an Amazon relay email', 'q4w8e2r6t0y3u7i1@marketplace.amazon.com', REDACTED],
    ['an E.164 phone', '+15555550142', REDACTED],
    ['a formatted international phone', 'call +1 206-555-0199.', `call ${REDACTED}.`],
    ['a UK phone', '+44 20 7946 0958', REDACTED],
    ['a phone with a bracketed area code', '+1 (206) 555-0199', REDACTED],
    ['a US phone in brackets', '(555) 555-0142', REDACTED],
    ['a dotted phone', '+33.1.23.45.67.89', REDACTED],
  ])('redacts %s', (_what, text, expected) => {
    expect(redactContactsInText(text)).toBe(expected);
  });

  it.each([
    '12345',
    '450789469',
    '112-0000001-1234567',
    '1Z999AA10123456784',
    '100.00',
    '+100.00',
    '+5.00 - 2.00',
    '(100.00)',
    '2026-08-02T14:05:11+05:30',
    '2026-08-02',
    '555-0142',
    '+1 206',
    'user at example dot com',
    '@handle',
  ])('keeps %j', (text) => {
    expect(redactContactsInText(text)).toBe(text);
  });
});

describe('pattern cost', () => {
  it('stays linear on hostile input', () => {
    const hostile = [
      'a'.repeat(50_000) + '@',
      '1 '.repeat(25_000),
      '1-'.repeat(25_000),
      '+1 '.repeat(15_000),
      'eyJ'.repeat(15_000),
      'a.'.repeat(25_000) + '@x',
      `${'x@'.repeat(25_000)}`,
    ];
    const started = Date.now();
    for (const text of hostile) {
      redactContactsInText(secrets(text));
    }
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
