import { describe, expect, it } from 'vitest';
import { redactContactsInText } from './contacts-in-text.js';
import { REDACTED } from './markers.js';
import { redactInput, redactOutput } from './redaction.service.js';
import { isSecretFieldName } from './secret-keys.js';
import { expectNoWorseThanProse } from './cost.spec-support.js';

/**
 * Two gaps of the earlier rules: a phone or email in a URL encoded with escapes other than %40 / %2B (or encoded twice),
 * a label or path-like name with a "/" or a trailing remark in parentheses, and a two-word label before a colon in
 * text ("API Key: …"). And what the wider rules leave alone.
 */
const out = (value: unknown): string => JSON.stringify(redactOutput(value));

describe('contacts in URL runs encoded with any escape, a form-encoded space, or twice (output)', () => {
  it.each([
    ['an encoded space after a parenthesised area code', 'https://api.example.com/c?phone=(415)%20555-2671&x=1', `https://api.example.com/c?phone=${REDACTED}&x=1`],
    ['encoded parentheses and space', 'https://api.example.com/c?phone=%28415%29%20555-2671', `https://api.example.com/c?phone=${REDACTED}`],
    ['a form-encoded space', 'https://api.example.com/c?phone=(415)+555-2671', `https://api.example.com/c?phone=${REDACTED}`],
    ['00 prefix and (0) trunk with encoded spaces', '/c?phone=0044%20(0)20%207946%200958', `/c?phone=${REDACTED}`],
    ['an email encoded twice', '/c?email=jane.doe%2540example.com&page=2', `/c?email=${REDACTED}&page=2`],
    ['a phone encoded twice', '/c?next=%252B44%25207911%2520123456', `/c?next=${REDACTED}`],
    ['encodeURI: "+" left a plus, spaces escaped', '/c?phone=+44%207911%20123456', `/c?phone=${REDACTED}`],
    ['NANP with encoded dashes', '/c?phone=415%2D555%2D2671', `/c?phone=${REDACTED}`],
    ['a path segment', '/customers/%28415%29%20555-2671/orders', `/customers/${REDACTED}/orders`],
  ])('%s', (_what, text, expected) => {
    expect(redactContactsInText(text)).toBe(expected);
    expect(out({ next: text })).not.toMatch(/555-2671|2671|7946|7911|jane/);
  });

  it('the encoded run is redacted whole; no decoded form is recorded', () => {
    const text = out({ landing_site: '/?ref=mail&phone=%28415%29%20555-2671&email=jane%2540example.com' });
    expect(text).toBe(JSON.stringify({ landing_site: `/?ref=mail&phone=${REDACTED}&email=${REDACTED}` }));
    expect(text).not.toMatch(/\(415\)|@example|%40example/);
  });

  it.each([
    'q=c%2B%2B&lang=en',
    'created_at_min=2024-05-01T10%3A00%3A00%2B02%3A00',
    'created_at_min=2024-05-01%2010%3A00%3A00&limit=250',
    'sig=abc%2Bdef%2F%3D&offset=%2B3600',
    'Signature=Ab12%2Bcd34%2F5678%3D%3D',
    'sale=100%25&tag=%40home',
    'sale=100%2525&tag=%2540home',
    'ids=5927413514539%2C5927413514540',
    'price=%2412.99&qty=%2B2',
    'q=shoes+size+42&sort=price+asc',
    '1+1=2, C++ and a+b stay',
    'version 2.0+build.1234',
    '2026-08-02T14:05:11+05:30',
    'discount 100% off, 50%2 kept',
    'filter=%28price%3E1000%29',
  ])('keeps %j', (text) => {
    expect(redactContactsInText(text)).toBe(text);
  });
});

const SECRET = 'hunter2-Corr3ct-Horse';

describe('labels with a "/" or a trailing remark name their value', () => {
  it.each([
    'Database / Password',
    'Stripe/API Key',
    'prod/db/DB Password',
    'Password (min 8 characters)',
    'API Key (production)',
    'Stripe / API Key (live)',
    'Key (secret)',
    'prod / db / password',
    'Secret Key',
    'Stripe Secret Key (live)',
    'AWS / Secret Key',
  ])('the value under %j is [REDACTED], input and output', (label) => {
    expect(isSecretFieldName(label)).toBe(true);
    expect(redactInput({ fields: [{ label, value: SECRET }] })).toEqual({ fields: [{ label, value: REDACTED }] });
    expect(redactOutput({ fields: [{ name: label, value: SECRET }] })).toEqual({ fields: [{ name: label, value: REDACTED }] });
  });

  it.each([
    'Gift / Token Pack',
    'Style / Pin',
    'Color / Enamel Pin',
    'Size / Secret Santa',
    'Season Pass (2024)',
    'Token Pack (10 pack)',
    'Secret Santa (large)',
    'Usage / Prompt Tokens',
    'Notes (password reset)',
    'https://x.com/oauth/token',
    'Gift Wrap (Token Pack)',
    'Secret Santa Key Ring',
  ])('keeps the value under %j', (label) => {
    expect(isSecretFieldName(label)).toBe(false);
    expect(redactOutput({ properties: [{ name: label, value: 'Blue' }] })).toEqual({ properties: [{ name: label, value: 'Blue' }] });
    expect(redactInput({ fields: [{ label, value: 'Blue' }] })).toEqual({ fields: [{ label, value: 'Blue' }] });
  });
});

describe('a two-word label before a colon in text names its value', () => {
  it.each([
    ['API Key: 8f7a6b5c4d3e2f1a0b9c', 'API Key: [REDACTED]'],
    ['your Secret Key: abcDEF123456, then', 'your Secret Key: [REDACTED], then'],
    ['Access Key:AKIA0000EXAMPLE', 'Access Key:[REDACTED]'],
    ['line one\nPrivate Key: base64stuff==', 'line one\nPrivate Key: [REDACTED]'],
    ['App\tKey: k-123456', 'App\tKey: [REDACTED]'],
    // blanks other than one space: a no-break space from HTML (&nbsp;), a narrow one, two spaces of aligned text
    ['API\u00a0Key: blue-sky-42', 'API\u00a0Key: [REDACTED]'],
    ['Secret\u00a0Key: blue-sky-42', 'Secret\u00a0Key: [REDACTED]'],
    ['Access\u202fKey: blue-sky-42', 'Access\u202fKey: [REDACTED]'],
    ['API  Key: blue-sky-42', 'API  Key: [REDACTED]'],
    ['API \u00a0\t\u2009Key:blue-sky-42', 'API \u00a0\t\u2009Key:[REDACTED]'],
    // a hyphenated prefix: the label's last two words are "API Key"
    ['Stripe-API Key: blue-sky-42', 'Stripe-API Key: [REDACTED]'],
    ['live-Secret\u00a0Key: blue-sky-42', 'live-Secret\u00a0Key: [REDACTED]'],
  ])('%j is redacted, input and output', (text, redacted) => {
    expect(redactOutput({ note: text })).toEqual({ note: redacted });
    expect(redactInput({ note: text })).toEqual({ note: redacted });
  });

  it.each(['API\u00a0Key', 'API  Key', 'Secret\u00a0Key', 'Access\u202fKey', 'Stripe-API Key'])('%j in text is secret as it is as data', (label) => {
    expect(redactInput({ fields: [{ label, value: SECRET }] })).toEqual({ fields: [{ label, value: REDACTED }] });
    expect(redactInput({ note: `${label}: ${SECRET}` })).toEqual({ note: `${label}: ${REDACTED}` });
  });

  it.each([
    'Primary Key: 12345',
    'Token Pack: 10 left',
    'Secret Santa: Bob',
    'status: expired',
    'my_API Key: 12',
    'the key: blue',
    'x.API Key: 1',
    'Primary\u00a0Key: 12345',
    'Token  Pack: 10 left',
    'Non-Primary Key: 12345',
    // a line break parts two lines, not two words
    'API\nKey: 12',
    'API\r\nKey: 12',
    'API\u2028Key: 12',
  ])(
    '%j stays',
    (text) => {
      expect(redactOutput({ note: text })).toEqual({ note: text });
    },
  );
});

describe('cost of the wider rules', () => {
  it('stays linear on 100 KB of hostile input', () => {
    const size = 100_000;
    const fill = (unit: string): string => unit.repeat(Math.ceil(size / unit.length)).slice(0, size);
    const hostile = ['%20', '+', '(', '%25', '%2525', '+1', '%2B1%20', '(415)+', '%28415%29', '0044%20', 'a%40', 'x%2540y', '1%20', '%E0%A4', 'API Key:', 'a Key:', 'Key: ', 'aaaa ',
      // blanks between a label's words, and a value looked for on the next line
      'API\u00a0\u00a0\u00a0Key:', 'a-API \u00a0Key:', `${'\u00a0'.repeat(20)}Key:`, 'Password:\n', 'Password:\r\n ', 'Password:\\n',
      'API\u00a0Key:\n', 'Password:\n"', 'Password:\n[', 'Password:\n- ', 'Password:\nHost:', `Password:\n${'a'.repeat(200)}`, `Password:\n${' '.repeat(50)}`,
      'Cookie:\n', 'Authorization:\n', 'token:\\r\\n\\"'].map(fill);
    expectNoWorseThanProse(hostile, (text) => {
      redactContactsInText(text);
      redactOutput({ note: text, fields: [{ label: `${text.slice(0, 2_000)} / Password`, value: 'x' }] });
    });
  });
});
