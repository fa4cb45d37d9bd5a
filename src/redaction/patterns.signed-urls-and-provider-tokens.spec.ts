import { describe, expect, it } from 'vitest';
import { REDACTED } from './markers.js';
import { redactSecretsInText } from './patterns.js';
import { redactInput, redactOutput } from './redaction.service.js';

const secrets = (text: string): string => redactSecretsInText(text, { cards: true });

describe('signed URLs whose signature parameter is plain "Signature"', () => {
  const urls = [
    [
      'CloudFront',
      'https://d111111abcdef8.cloudfront.net/image.jpg?Expires=1700000000&Signature=nitfHRCrtziwO2HwPfWw~yYDhUF5EwRunQA-j19DzZrvDh6hQ73lDx&Key-Pair-Id=K2JCJMDEHXQW5F',
    ],
    ['S3 SigV2 presigned', 'https://bucket.s3.amazonaws.com/f.pdf?AWSAccessKeyId=AKIDEXAMPLE&Expires=1700000000&Signature=vjbyPxybdZaNmGa%2ByT272YEAiv4%3D'],
    ['GCS V2', 'https://storage.googleapis.com/b/o?GoogleAccessId=svc@p.iam.gserviceaccount.com&Expires=1700000000&Signature=BASE64sig%2Fabc%3D'],
  ] as const;

  it.each(urls)('%s: the signature goes, in input and output, and the expiry and host stay', (_what, url) => {
    const signature = /Signature=([^&]+)/.exec(url)![1]!;
    for (const redacted of [(redactInput({ url }) as { url: string }).url, (redactOutput({ download_url: url }) as { download_url: string }).download_url]) {
      expect(redacted).not.toContain(signature);
      expect(redacted).toContain(`Signature=${REDACTED}`);
      expect(redacted).toContain('Expires=1700000000');
      expect(redacted.slice(0, 30)).toBe(url.slice(0, 30));
    }
  });

  it('CloudFront: only the signature goes', () => {
    const url = urls[0][1];
    expect(redactInput({ url })).toEqual({ url: url.replace(/Signature=[^&]+/, `Signature=${REDACTED}`) });
  });

  it('lower case, and inside a percent-encoded redirect', () => {
    expect(secrets('x.pdf?expires=1&signature=abc123')).toBe(`x.pdf?expires=1&signature=${REDACTED}`);
    expect(secrets('next=https%3A%2F%2Fcdn.x%2Fa.jpg%3FExpires%3D1%26Signature%3Dabc123%26Key-Pair-Id%3DK2')).toBe(
      `next=https%3A%2F%2Fcdn.x%2Fa.jpg%3FExpires%3D1%26Signature%3D${REDACTED}%26Key-Pair-Id%3DK2`,
    );
  });

  it.each(['?signatureRequired=true&signature_confirmation=ADULT', '?Expires=1700000000&Key-Pair-Id=K2JCJMDEHXQW5F', 'digital_signature=present'])(
    'keeps %j: only the exact name is a signature',
    (text) => {
      expect(secrets(text)).toBe(text);
    },
  );

  it('keeps a property named like a signature option: only the URL parameter is secret', () => {
    expect(redactInput({ signature_confirmation: 'ADULT', signatureRequired: 'yes' })).toEqual({ signature_confirmation: 'ADULT', signatureRequired: 'yes' });
  });
});

describe('a bare Bearer token with characters outside token68', () => {
  it.each([
    ['a Salesforce session id', 'curl -H Bearer 00D5g000000abcd!AQ0AQAbcdefghij0123456789 https://x', `curl -H Bearer ${REDACTED} https://x`],
    ['up to a comma', 'Bearer 00D5g000000abcd!AQ0AQAbcdef, then', `Bearer ${REDACTED}, then`],
    ['up to a quote', '{"h": "Bearer 00D5g000000abcd!AQ0AQAbcdef"}', `{"h": "Bearer ${REDACTED}"}`],
    ['up to a tag', '<code>Bearer 00D5g000000abcd!AQ0AQAbcdef</code>', `<code>Bearer ${REDACTED}</code>`],
    ['base64 padding', 'Bearer dXNlcjpwYXNzd29yZA== x', `Bearer ${REDACTED} x`],
  ])('redacts %s', (_what, text, expected) => {
    expect(secrets(text)).toBe(expected);
  });

  it.each(['WWW-Authenticate: Bearer realm="shop", error="invalid_token"', 'Bearer error=invalid_token', 'the bearer of bad news', 'Bearer <token>'])(
    'keeps %j',
    (text) => {
      expect(secrets(text)).toBe(text);
    },
  );
});

describe('tokens of Nango providers, outside a secret key', () => {
  it.each([
    ['HubSpot, North America', 'pat-na1-12345678-1234-1234-1234-123456789012'],
    ['HubSpot, Europe', 'pat-eu1-abcdef12-abcd-4bcd-8bcd-abcdef123456'],
    ['Notion', 'ntn_1234567890abcdefghijklmnopqrstuvwxyzABCDEFGHIJK'],
    ['Notion, of before', 'secret_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ'],
    ['Linear', 'lin_api_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN'],
    ['Atlassian', `ATATT3xFfGF0${'aB3_-'.repeat(36)}=0A1B2C3D`],
    ['DigitalOcean', `dop_v1_${'0123456789abcdef'.repeat(4)}`],
    ['HashiCorp Vault', 'hvs.CAESIabcdefghijklmnopqrstuvwxyz0123456789'],
  ])('redacts %s', (_what, token) => {
    expect(secrets(`configured with ${token} yesterday`)).toBe(`configured with ${REDACTED} yesterday`);
    expect(redactInput({ description: `use ${token}` })).toEqual({ description: `use ${REDACTED}` });
  });

  it.each([
    ['a secret_ word', 'the secret_santa list and secret_key_rotation_policy'],
    ['secret_ one character short', `secret_${'a'.repeat(39)}`],
    ['secret_ inside a word', `mysecret_${'a'.repeat(43)}`],
    ['a HubSpot head without a UUID', 'pat-na1-12345678'],
    ['a Notion head too short', 'ntn_123456'],
    ['a DigitalOcean head with 63 hex digits', `dop_v1_${'a'.repeat(63)}`],
    ['a Vault head too short', 'hvs.abc'],
    ['ATATT too short', 'ATATT3xFf'],
  ])('keeps %s', (_what, text) => {
    expect(secrets(text)).toBe(text);
  });
});

describe('webhook URLs whose path is the credential', () => {
  const discordToken = 'abcdEFGHijklMNOPqrstUVWXyz0123456789_-abcdEFGHijklMNOPqrstUVWXyz01';
  it.each([
    ['Discord', `post to https://discord.com/api/webhooks/123456789012345678/${discordToken} now`, `post to https://discord.com/api/${REDACTED} now`],
    ['Discord, versioned', `https://discordapp.com/api/v10/webhooks/123456789012345678/${discordToken}`, `https://discordapp.com/api/v10/${REDACTED}`],
    ['Discord, percent-encoded', `u=https%3A%2F%2Fdiscord.com%2Fapi%2Fwebhooks%2F123456789012345678%2F${discordToken}&x=1`, `u=https%3A%2F%2Fdiscord.com%2Fapi%2F${REDACTED}&x=1`],
    [
      'Teams',
      'https://acme.webhook.office.com/webhookb2/1a2b3c4d-0000-0000-0000-000000000000@5e6f/IncomingWebhook/0123456789abcdef0123456789abcdef/9a8b7c6d-0000-0000-0000-000000000000 ok',
      `https://acme.webhook.office.com/webhookb2/1a2b3c4d-0000-0000-0000-000000000000@5e6f/${REDACTED} ok`,
    ],
    [
      'Teams, of before',
      'https://outlook.office.com/webhook/a-b@c-d/IncomingWebhook/0123456789abcdef0123456789abcdef/e-f',
      `https://outlook.office.com/webhook/a-b@c-d/${REDACTED}`,
    ],
  ])('redacts the path of %s, keeping the host', (_what, text, expected) => {
    expect(secrets(text)).toBe(expected);
  });

  it.each([
    ['webhooks of another host', `https://api.example.com/api/webhooks/123456789012345678/${discordToken}`],
    ['a Shopify webhook resource', 'GET https://acme.myshopify.com/admin/api/2024-01/webhooks/123456789012345678.json'],
    ['IncomingWebhook of another host', 'https://example.com/hooks/a@b/IncomingWebhook/0123456789abcdef0123456789abcdef'],
    ['the Discord docs', 'see https://discord.com/api/webhooks for details'],
  ])('keeps %s', (_what, text) => {
    expect(secrets(text)).toBe(text);
  });
});

describe('Basic credentials whose password is not ASCII', () => {
  it.each(['user:pässwörd', 'jürgen:geheim', '用户:密码'])('redacts Basic base64(%j)', (plain) => {
    const b64 = Buffer.from(plain, 'utf8').toString('base64');
    expect(secrets(`use Basic ${b64} here`)).toBe(`use Basic ${REDACTED} here`);
  });

  it.each([
    ['English after Basic', 'Basic plan: 10 seats and Basic information'],
    ['bytes that are no UTF-8', `Basic ${Buffer.from([0xff, 0x3a, 0xfe, 0x80]).toString('base64')}`],
    ['a control character', `Basic ${Buffer.from('a:\u0007b', 'utf8').toString('base64')}`],
    ['no colon', `Basic ${Buffer.from('pässwörd', 'utf8').toString('base64')}`],
  ])('keeps %s', (_what, text) => {
    expect(secrets(text)).toBe(text);
  });
});
