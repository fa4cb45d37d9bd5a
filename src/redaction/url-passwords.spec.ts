/**
 * A URL password written unencoded with "/", "?" or "#" in it (an AWS secret key in an s3:// URL, a generated
 * password): it goes whole, while a port followed by a path with an "@" in it stays.
 */
import { describe, expect, it } from 'vitest';
import { expectNoWorseThanProse } from './cost.spec-support.js';
import { REDACTED } from './markers.js';
import { redactSecretsInText } from './patterns.js';
import { redactInput, redactOutput } from './redaction.service.js';

const secrets = (text: string): string => redactSecretsInText(text, { cards: true });
const AWS_SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';

describe('URL_PASSWORD: a password holding "/", "?" or "#"', () => {
  it.each([
    ['an AWS secret key in an s3 URL', `s3://AKIAIOSFODNN7EXAMPLE:${AWS_SECRET}@my-bucket/backups`, `s3://${REDACTED}:${REDACTED}@my-bucket/backups`],
    ['a "/" in a password', 'https://admin:pa/ss@db', `https://admin:${REDACTED}@db`],
    ['"?" and "#" in a password, the path after the host kept', 'https://admin:pa?ss#x@db/x y@z', `https://admin:${REDACTED}@db/x y@z`],
    ['a password starting with "/"', 'ftp://bob:/s3cret@files.example/x', `ftp://bob:${REDACTED}@files.example/x`],
    ['digits then a letter before the "/"', 'amqp://svc:12ab/cd@mq:5672', `amqp://svc:${REDACTED}@mq:5672`],
    ['in JSON, to the closing quote at most', `{"dsn":"postgres://app:x/y@db:5432/app","n":"a@b"}`, `{"dsn":"postgres://app:${REDACTED}@db:5432/app","n":"a@b"}`],
  ])('%s', (_what, text, expected) => {
    expect(secrets(text)).toBe(expected);
  });

  it.each([
    ['a port, then a path with an "@"', 'https://host:8443/path?x=a@b'],
    ['a port, then "?"', 'https://host:8443?email=a@b'],
    ['a dev server path', 'http://localhost:3000/@vite/client'],
    ['an IPv6 host and port', 'http://[::1]:8080/x@y'],
    ['an IPv6 host with letters', 'http://[2001:db8::1]:443/a@b'],
    ['an "@" past a blank', '//note:see the docs @alice'],
    ['an "@" past 256 characters', `s3://k:${'a/'.repeat(140)}@bucket`],
  ])('keeps %s', (_what, text) => {
    expect(secrets(text)).toBe(text);
  });

  it('the ledger records neither the password nor part of it, in input or output', () => {
    const text = `s3://AKIAIOSFODNN7EXAMPLE:${AWS_SECRET}@my-bucket/backups`;
    for (const recorded of [JSON.stringify(redactInput({ source: text })), JSON.stringify(redactOutput({ source: text }))]) {
      expect(recorded).not.toContain('wJalrXUtnFEMI');
      expect(recorded).not.toContain('bPxRfiCYEXAMPLEKEY');
      expect(recorded).toContain('@my-bucket/backups');
    }
  });

  it('100 KB of userinfo near-misses redact in well under 200 ms, and as fast as prose', () => {
    const hostile = [
      '//a:b/'.repeat(17_000),
      `//a:${'b/'.repeat(50_000)}@`,
      'a://a:1/'.repeat(12_500),
      'x://[::1]:'.repeat(10_000),
      `${'//a:b/c'.repeat(14_000)}@`,
    ];
    for (const text of hostile) {
      secrets(text.slice(0, 10_000)); // warm up
      let best = Infinity;
      for (let attempt = 0; attempt < 3; attempt++) {
        const before = process.cpuUsage();
        secrets(text);
        const used = process.cpuUsage(before);
        best = Math.min(best, used.user + used.system);
      }
      expect(best, text.slice(0, 20)).toBeLessThan(200_000);
    }
    expectNoWorseThanProse(hostile, secrets);
  });
});

describe('URL_USER_CREDENTIAL: a credential in the user part of a URL', () => {
  const KEY = 'live_Zq8xV3mK9pL2wR7tY5nBc4D1fG6hJ0';
  const GH = 'a94a8fe5ccb19ba61c4c0873d391e987982fbbd3';
  it.each([
    ['an API key as the user, empty password (curl -u KEY:)', `https://${KEY}:@acme.chargebee.example/api/v2/customers`, `https://${REDACTED}:@acme.chargebee.example/api/v2/customers`],
    ["GitHub's token:x-oauth-basic", `https://${GH}:x-oauth-basic@github.com/acme/shop.git`, `https://${REDACTED}:${REDACTED}@github.com/acme/shop.git`],
    ['a token as the only userinfo', `https://${GH}@github.com/acme/shop.git`, `https://${REDACTED}@github.com/acme/shop.git`],
    ['a key with the placeholder password x', `https://${KEY}:x@api.example/v1`, `https://${REDACTED}:${REDACTED}@api.example/v1`],
    ['in JSON', `{"target":"https://${GH}@github.com/a.git"}`, `{"target":"https://${REDACTED}@github.com/a.git"}`],
    ['with a real password too: both go', `https://${GH}:s3cret-Pass@host/x`, `https://${GH}:${REDACTED}@host/x`],
  ])('%s', (_what, text, expected) => {
    expect(secrets(text)).toBe(expected);
  });

  it.each([
    ['a plain user name and no password', 'ssh://git@github.com/acme/shop.git'],
    ['a plain user name, empty password', 'postgres://postgres:@localhost/app'],
    ['no userinfo, an "@" in the path', 'https://example.com/users/@alice'],
    ['a port, then a path with an "@"', 'https://host:8443/path?x=a@b'],
  ])('keeps %s', (_what, text) => {
    expect(secrets(text)).toBe(text);
  });

  it('the ledger records no part of it, in input or output', () => {
    for (const text of [`https://${KEY}:@acme.chargebee.example/x`, `https://${GH}:x-oauth-basic@github.com/a.git`, `https://${GH}@github.com/a.git`]) {
      for (const recorded of [JSON.stringify(redactInput({ target: text })), JSON.stringify(redactOutput({ target: text }))]) {
        expect(recorded).not.toContain(KEY.slice(5, 20));
        expect(recorded).not.toContain(GH.slice(0, 16));
      }
    }
  });

  it('100 KB of user-part near-misses redact as fast as prose', () => {
    expectNoWorseThanProse(['//abc'.repeat(20_000), `//${'a'.repeat(100_000)}`, '//a:x//a:'.repeat(11_000), `${'//ab:x'.repeat(16_000)}@`], secrets);
  });
});
