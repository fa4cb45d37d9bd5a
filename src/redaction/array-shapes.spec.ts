import { describe, expect, it } from 'vitest';
import { REDACTED, redactInput, redactOutput } from './redaction.service.js';

const R = REDACTED;

describe('a flat header list (Node rawHeaders: name, value, name, value, …)', () => {
  it('redacts the value after a secret header name, and only that value', () => {
    const raw = ['Host', 'api.x.com', 'X-Api-Key', 'abcdef123456', 'Content-Type', 'application/json'];
    expect(redactInput(raw)).toEqual(['Host', 'api.x.com', 'X-Api-Key', R, 'Content-Type', 'application/json']);
  });

  it.each(['Authorization', 'Cookie', 'Set-Cookie', 'Proxy-Authorization', 'X-Shopify-Access-Token', 'x-amz-security-token'])(
    '%s, in input and in output (a request-echo answer)',
    (name) => {
      const raw = ['User-Agent', 'curl/8.5.0', name, 'opaquevalue123', 'Accept', '*/*'];
      expect(redactInput(raw)).toEqual(['User-Agent', 'curl/8.5.0', name, R, 'Accept', '*/*']);
      expect(redactOutput({ echo: { rawHeaders: raw } })).toEqual({ echo: { rawHeaders: ['User-Agent', 'curl/8.5.0', name, R, 'Accept', '*/*'] } });
    },
  );

  it('names in lower case, as HTTP/2 sends them', () => {
    expect(redactInput(['host', 'x.com', 'cookie', 'sid=abc123', 'x-api-key', 'k1', 'accept', '*/*'])).toEqual([
      'host', 'x.com', 'cookie', R, 'x-api-key', R, 'accept', '*/*',
    ]);
  });

  it('a value already [REDACTED], or made so by the text rules, is one [REDACTED]', () => {
    expect(redactInput(['Host', 'x.com', 'Authorization', R])).toEqual(['Host', 'x.com', 'Authorization', R]);
    expect(redactInput(['Host', 'x.com', 'Authorization', 'Bearer abcdefgh12345678'])).toEqual(['Host', 'x.com', 'Authorization', R]);
  });

  it('null under a secret name stays null: it carries nothing', () => {
    expect(redactInput(['Host', 'x.com', 'Authorization', null])).toEqual(['Host', 'x.com', 'Authorization', null]);
  });

  // A tag list of exactly two (['password', 'reset']) is not among these: a two-item array is a [name, value] entry
  // (isSecretEntry, value-signals.ts), which redacts its second item when the first is a secret name, on purpose.
  describe('arrays that are not header lists keep their items', () => {
    it.each([
      ['a tag list', ['password', 'reset', 'login']],
      ['a longer word list with secret words but no common header', ['password', 'reset', 'token', 'expired']],
      ['4-digit numbers', [1234, 5678, 9012, 3456]],
      ['4-digit strings', ['1234', '5678', '9012', '3456']],
      ['a header list with no secret header', ['Host', 'api.x.com', 'Content-Type', 'application/json', 'Accept', '*/*']],
      ['an odd length', ['Host', 'api.x.com', 'X-Api-Key', 'abcdef123456', 'Accept']],
      ['a name with a blank among the even items', ['Host', 'api.x.com', 'X Api Key', 'abcdef123456']],
    ])('%s', (_label, items) => {
      expect(redactInput(items)).toEqual(items);
      expect(redactOutput({ tags: items })).toEqual({ tags: items });
    });
  });
});

describe('a private key given as an array of its lines', () => {
  const BEGIN = '-----BEGIN RSA PRIVATE KEY-----';
  const END = '-----END RSA PRIVATE KEY-----';

  it('redacts every line from BEGIN through END, and keeps the items around the block', () => {
    const lines = ['key follows', BEGIN, 'MIIEowIBAAKCAQEAsecretmaterial', 'AnotherLineOfKeyMaterial==', END, 'done'];
    expect(redactInput(lines)).toEqual(['key follows', R, R, R, R, 'done']);
    expect(redactOutput({ config: { lines } })).toEqual({ config: { lines: ['key follows', R, R, R, R, 'done'] } });
  });

  it('an unterminated block is redacted to the end of the array (fail closed)', () => {
    expect(redactInput([BEGIN, 'MIIEowIBAAKCAQEAsecretmaterial', 'trailing line', { more: 'x' }])).toEqual([R, R, R, R]);
  });

  it('PGP armour and PKCS#8 blocks, two in one array, the line between them kept', () => {
    const lines = [
      '-----BEGIN PGP PRIVATE KEY BLOCK-----', 'lQOYBGabcdefsecret', '-----END PGP PRIVATE KEY BLOCK-----',
      'between',
      '-----BEGIN PRIVATE KEY-----', 'MIIEvQIBADANBgkqhkiGsecret', '-----END PRIVATE KEY-----',
    ];
    expect(redactInput(lines)).toEqual([R, R, R, 'between', R, R, R]);
  });

  it('a whole block in one item is left to the text rules, and the next item stays', () => {
    expect(redactInput(['first', `${BEGIN}\nMIIEowIBAAKCAQEAsecret\n${END}`, 'next'])).toEqual(['first', R, 'next']);
  });

  it('a certificate or a public key split into lines stays', () => {
    const cert = ['-----BEGIN CERTIFICATE-----', 'MIIBszCCAVmgAwIBAgIU', '-----END CERTIFICATE-----'];
    const pub = ['-----BEGIN PUBLIC KEY-----', 'MFkwEwYHKoZIzj0CAQYI', '-----END PUBLIC KEY-----'];
    expect(redactInput(cert)).toEqual(cert);
    expect(redactInput(pub)).toEqual(pub);
  });
});
