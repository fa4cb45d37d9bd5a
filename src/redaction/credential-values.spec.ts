import { describe, expect, it } from 'vitest';
import { CREDENTIAL_SCHEMAS } from '../credentials/credential-schemas.js';
import { CREDENTIAL_VALUE_MIN_LENGTH, credentialSecretForms, redactCredentialValues, redactCredentialValuesInText } from './credential-values.js';
import { REDACTED } from './markers.js';

const NANGO = { secretKey: '1b4f3c2a-8d7e-4f6a-9b0c-2d3e4f5a6b7c', connectionId: 'conn-1', providerConfigKey: 'github' };
const SYMBOLS = 'Zx!9$q+R/7&k=L m#2?"p\\T@w%4';

describe('credentialSecretForms: which values of a vendor config are looked for', () => {
  it('the secrets of each schema, not what names a shop, account, region or connection', () => {
    expect(credentialSecretForms(NANGO)).toEqual([NANGO.secretKey]);
    const shopify = { shopDomain: 'acme-emulator.myshopify.com', apiVersion: '2026-07', clientId: '8f14e45fceea167a5a36dedd4bea2543', clientSecret: 'shpss_5d41402abc4b2a76', refreshToken: 'shprt_9c2e5b1f7a3d4e60' };
    const forms = credentialSecretForms(shopify);
    expect(forms).toContain(shopify.clientSecret);
    expect(forms).toContain(shopify.refreshToken);
    for (const name of [shopify.shopDomain, shopify.apiVersion, shopify.clientId]) expect(forms).not.toContain(name);
    const jumio = { clientId: 'jumio-client', clientSecret: 'JumioSecret7qR2vX9mB4', region: 'amer-1', accountId: '0f0e0d0c-0b0a-4908-8706-050403020100' };
    expect(credentialSecretForms(jumio)).not.toContain(jumio.accountId);
    const amazon = { clientId: 'amzn1.application-oa2-client.x', clientSecret: 'amzn1.oa2-cs.v1.7f3e9a2c', refreshToken: 'Atzr|refresh-token-0001', region: 'na', marketplaceId: 'ATVPDKIKX0DER' };
    expect(credentialSecretForms(amazon)).not.toContain(amazon.marketplaceId);
    expect(credentialSecretForms(amazon)).toContain(amazon.refreshToken);
  });

  it('the access tokens bought with the config are looked for too, in the same forms, with or without a config', () => {
    const token = 'Atza|IwEBIA bought/token+x';
    const forms = credentialSecretForms(NANGO, [token, 'short']);
    expect(forms).toEqual(expect.arrayContaining([NANGO.secretKey, token, encodeURIComponent(token), 'Atza%7CIwEBIA+bought%2Ftoken%2Bx']));
    expect(forms).not.toContain('short'); // under CREDENTIAL_VALUE_MIN_LENGTH, as a config's value
    expect(credentialSecretForms(null, [token])).toContain(encodeURIComponent(token));
    expect(credentialSecretForms(null)).toEqual([]);
  });

  it('every field a schema declares is either looked for or named as no secret (a new secret field is redacted by default)', () => {
    for (const [type, schema] of Object.entries(CREDENTIAL_SCHEMAS)) {
      const fields = Object.keys((schema as { properties: Record<string, unknown> }).properties);
      const config = Object.fromEntries(fields.map((f) => [f, `${f}-value-long-enough`]));
      const forms = credentialSecretForms(config);
      const secret = fields.filter((f) => forms.includes(`${f}-value-long-enough`)).sort();
      const expected = { shopify: ['accessToken', 'clientSecret', 'refreshToken'], amazon: ['clientSecret', 'refreshToken'], jumio: ['clientSecret'], nango: ['secretKey'] }[type];
      expect(secret, type).toEqual(expected);
    }
    expect(credentialSecretForms({ newSecretField: 'a-new-kind-of-secret' })).toContain('a-new-kind-of-secret');
  });

  it('as written, percent-encoded, form-encoded and JSON-escaped; a client id and secret as HTTP Basic base64; longest first', () => {
    const forms = credentialSecretForms({ secretKey: SYMBOLS });
    expect(forms).toEqual(expect.arrayContaining([SYMBOLS, encodeURIComponent(SYMBOLS), new URLSearchParams({ v: SYMBOLS }).toString().slice(2), JSON.stringify(SYMBOLS).slice(1, -1)]));
    expect([...forms].sort((a, b) => b.length - a.length)).toEqual(forms);
    const basic = Buffer.from('jumio-client:JumioSecret7qR2vX9mB4').toString('base64');
    expect(credentialSecretForms({ clientId: 'jumio-client', clientSecret: 'JumioSecret7qR2vX9mB4' })).toContain(basic);
  });

  it('values too short to be a secret are not looked for (they would hide ordinary words), nor anything of no config', () => {
    expect(CREDENTIAL_VALUE_MIN_LENGTH).toBe(8);
    expect(credentialSecretForms({ secretKey: 'abc1234', clientSecret: 'x' })).toEqual([]);
    expect(credentialSecretForms(null)).toEqual([]);
    expect(credentialSecretForms({ secretKey: 12345678901 })).toEqual([]);
  });
});

describe('redactCredentialValues', () => {
  const forms = credentialSecretForms({ secretKey: SYMBOLS, connectionId: 'conn-1' });

  it('in strings at any depth and in object keys, in every form', () => {
    const answer = {
      id: 42,
      debug: `request authorised with key ${SYMBOLS}`,
      url: `https://x.example/cb?k=${encodeURIComponent(SYMBOLS)}&c=conn-1`,
      form: `key=${new URLSearchParams({ v: SYMBOLS }).toString().slice(2)}`,
      quoted: JSON.stringify({ secretKey: SYMBOLS }),
      nested: [{ deeper: [SYMBOLS] }],
      [SYMBOLS]: true,
    };
    const out = redactCredentialValues(answer, forms);
    const text = JSON.stringify(out);
    for (const form of forms) expect(text.includes(form), form).toBe(false);
    expect(out).toMatchObject({ id: 42, debug: `request authorised with key ${REDACTED}`, nested: [{ deeper: [REDACTED] }], [REDACTED]: true });
    expect(out.url).toBe(`https://x.example/cb?k=${REDACTED}&c=conn-1`);
    expect(Object.keys(out)).toHaveLength(Object.keys(answer).length);
  });

  it('an answer without any is handed back as it is (nothing copied); a copy keeps the rest and its order', () => {
    const clean = { a: [1, { b: 'text' }], c: null, d: true };
    expect(redactCredentialValues(clean, forms)).toBe(clean);
    const answer = { a: 1, s: SYMBOLS, z: { keep: 'me' } };
    const out = redactCredentialValues(answer, forms);
    expect(out).not.toBe(answer);
    expect(Object.keys(out)).toEqual(['a', 's', 'z']);
    expect(out.z).toBe(answer.z);
    expect(answer.s).toBe(SYMBOLS); // the vendor's value itself is not changed
  });

  it('a redacted name never takes another member\'s, and "__proto__" stays a member', () => {
    const answer = JSON.parse(`{"${REDACTED}": 1, ${JSON.stringify(SYMBOLS)}: 2, "__proto__": ${JSON.stringify(SYMBOLS)}}`) as Record<string, unknown>;
    const out = redactCredentialValues(answer, forms);
    expect(Object.values(out)).toEqual([1, 2, REDACTED]);
    expect(Object.keys(out)).toEqual([REDACTED, `${REDACTED} (2)`, '__proto__']);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
  });

  it('in text: each form, nothing else', () => {
    expect(redactCredentialValuesInText(`a ${SYMBOLS} b ${encodeURIComponent(SYMBOLS)}`, forms)).toBe(`a ${REDACTED} b ${REDACTED}`);
    expect(redactCredentialValuesInText('conn-1 ok', forms)).toBe('conn-1 ok');
    expect(redactCredentialValues('plain', [])).toBe('plain');
  });
});
