/**
 * Cases a mutation-testing pass found untested: each fails on a
 * surviving mutant of src/redaction/* (see the comment on each case). Pure functions, no database.
 */
import { describe, expect, it } from 'vitest';
import { redactContactsInText } from './contacts-in-text.js';
import { REDACTED } from './markers.js';
import { redactSecretsInText } from './patterns.js';
import { redactInput } from './redaction.service.js';

const secrets = (text: string): string => redactSecretsInText(text, { cards: true });

describe('vendor token shapes whose prefix alternative no test names (token-shapes.ts)', () => {
  it.each([
    // token-shapes.ts:28 shp(?:at|ca|pa|ss|ua|rt)_ -> drop "ua"
    ['a Shopify user access token (shpua_)', 'token shpua_0123456789abcdef0123456789abcdef end'],
    // token-shapes.ts:31 [sr]k_ -> sk_
    ['a Stripe restricted key (rk_live_)', 'key rk_live_51Habcdefghijklmnopqrstuv end'],
    // token-shapes.ts:32 gh[pousr]_ -> gh[pous]_
    ['a GitHub refresh token (ghr_)', 'refresh ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c3 end'],
    // token-shapes.ts:36 xox[abcdeprs]- -> drop "s"
    ['a Slack session token (xoxs-)', 'slack xoxs-1234567890-abcdefghij end'],
  ])('redacts %s in free text', (_what, text) => {
    const out = secrets(text);
    expect(out).toContain(REDACTED);
    expect(out).not.toMatch(/shpua_0|rk_live_5|ghr_1B|xoxs-1/);
  });
});

describe('shapes in free text whose alternatives no test exercises unlabelled (patterns.ts, payment-numbers.ts)', () => {
  // patterns.ts:14 TAX_ID: drop |\d{2}-\d{7} — the only EIN test is labelled "EIN:", which secret-fields redacts anyway
  it('redacts an EIN with no label before it', () => {
    expect(secrets('payee 12-3456789 on file')).toBe(`payee ${REDACTED} on file`);
  });

  it.each([
    // payment-numbers.ts:103 /^3[0689]/ -> /^3[068]/ (Diners 39, 14 digits)
    ['a Diners card starting 39', '39000000000005'],
    // payment-numbers.ts:104 drop |2131 (JCB 15 digits)
    ["a JCB 2131 card", '213100000000001'],
    // payment-numbers.ts:101 n > 19 -> n > 18 (19-digit Visa / UnionPay)
    ['a 19-digit card', '4111111111111111110'],
    // payment-numbers.ts:148 drop || layout === '4-6-4' (Diners printed 4-6-4)
    ['a Diners card printed 4-6-4', '3056 930902 5904'],
  ])('redacts %s', (_what, card) => {
    expect(secrets(`card ${card} thanks`)).toBe(`card ${REDACTED} thanks`);
  });
});

describe('contacts in vendor text (contacts-in-text.ts, payment-numbers.ts)', () => {
  it.each([
    // payment-numbers.ts:23 end >= 15 -> end > 15: the shortest IBAN (Norway, 15) written without blanks
    ['a Norwegian IBAN written whole', 'IBAN NO9386011117947 ok', `IBAN ${REDACTED} ok`],
    // contacts-in-text.ts:143 drop || n === 7: "00 7" (Russia, Kazakhstan) then reads as no country code
    ['a Russian phone after 00', 'call 007 495 123 4567 now', `call ${REDACTED} now`],
    // contacts-in-text.ts:60 drop |msisdn / |whatsapp: the query value then reads as a code
    ['an msisdn= query value', 'https://sms.example/send?msisdn=07911-123456&x=1', `https://sms.example/send?msisdn=${REDACTED}&x=1`],
    ['a whatsapp= query value', 'https://wa.example/send?whatsapp=07911-123456', `https://wa.example/send?whatsapp=${REDACTED}`],
  ])('redacts %s', (_what, text, expected) => {
    expect(redactContactsInText(text)).toBe(expected);
  });
});

describe('secret names written as one lower-case word (secret-keys.ts:127)', () => {
  // isSecretKey: drop startsWith('ssn') / endsWith('ssn'): keyWords cannot split these, so only the edge test catches them
  it.each(['customerssn', 'ssnlast4'])('redacts the value of %s', (key) => {
    expect(redactInput({ [key]: '987654' })).toEqual({ [key]: REDACTED });
  });
});
