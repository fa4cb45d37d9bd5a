import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emulatorEndpoints } from '../handler.spec-support.js';
import { fetchOAuthToken, MAX_LIFETIME_SEC } from './oauth-token.js';
import { TokenFetchError } from './token-cache.js';

/** A token endpoint answering 200 with whatever body the test set last. */
let body = '';
let status = 200;
let extraHeaders: Record<string, string> = {};
let server: http.Server;
let url = '';

beforeAll(async () => {
  server = http.createServer((_req, res) => {
    res.writeHead(status, { 'Content-Type': 'application/json', ...extraHeaders });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function lifetimeFor(raw: string): Promise<number> {
  body = raw;
  const got = await fetchOAuthToken({ label: 'Test', url: `${url}/token`, headers: {}, body: '{}', endpoints: emulatorEndpoints(url), rateLimitBackoffMs: 1_000 });
  expect(got.token).toBe('tok-lifetime');
  return got.expiresInSec;
}

describe('fetchOAuthToken: the lifetime it believes', () => {
  it('caps an absurd expires_in at a day instead of handing it on', async () => {
    expect(MAX_LIFETIME_SEC).toBe(86_400);
    expect(await lifetimeFor('{"access_token":"tok-lifetime","expires_in":1e15}')).toBe(MAX_LIFETIME_SEC);
    expect(await lifetimeFor('{"access_token":"tok-lifetime","expires_in":86401}')).toBe(MAX_LIFETIME_SEC);
  });

  it("keeps the vendors' real lifetimes: an hour (LWA, Jumio, Shopify offline tokens) and Shopify's ~24 h", async () => {
    expect(await lifetimeFor('{"access_token":"tok-lifetime","expires_in":3600}')).toBe(3_600);
    expect(await lifetimeFor('{"access_token":"tok-lifetime","expires_in":86399}')).toBe(86_399);
    expect(await lifetimeFor('{"access_token":"tok-lifetime","expires_in":86400}')).toBe(86_400);
  });

  it('a missing, unusable or overflowing expires_in still gets the short default', async () => {
    expect(await lifetimeFor('{"access_token":"tok-lifetime"}')).toBe(300);
    expect(await lifetimeFor('{"access_token":"tok-lifetime","expires_in":"soon"}')).toBe(300);
    expect(await lifetimeFor('{"access_token":"tok-lifetime","expires_in":0}')).toBe(300);
    expect(await lifetimeFor('{"access_token":"tok-lifetime","expires_in":1e400}')).toBe(300); // Infinity once parsed
  });
});

function fetchWith(raw: string) {
  body = raw;
  return fetchOAuthToken({ label: 'Test', url: `${url}/token`, headers: {}, body: '{}', endpoints: emulatorEndpoints(url), rateLimitBackoffMs: 1_000 });
}

describe('fetchOAuthToken: the access token it accepts', () => {
  it('refuses a token that cannot be sent as a header: bad_response, nothing sent, the token not in the message', async () => {
    for (const bad of ['tok-bad\r\nx-injected: 1', 'tok with space', 'tök-ünicode', `tok-${'x'.repeat(8_189)}`, '\u0000tok']) {
      const err = await fetchWith(JSON.stringify({ access_token: bad, expires_in: 3600 })).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, JSON.stringify(bad.slice(0, 20))).toBeInstanceOf(TokenFetchError);
      const { outcome } = err as TokenFetchError;
      expect(outcome).toMatchObject({ ok: false, kind: 'bad_response', vendorStatus: 200, requestSent: false });
      expect(outcome.message).toBe('Test token endpoint answered with an access token that cannot be sent as a header');
    }
  });

  it("accepts the vendors' real token shapes (LWA Atza|..., a Jumio JWT, Shopify shpat_/shpua_), up to 8 KiB", async () => {
    for (const tok of ['Atza|IwEBIJr-abc_DEF+/=', 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln-_', 'shpat_0123456789abcdef', 'shpua_x', `t${'x'.repeat(8_191)}`]) {
      expect((await fetchWith(JSON.stringify({ access_token: tok, expires_in: 3600 }))).token).toBe(tok);
    }
  });

  it('reads a token answer that starts with a UTF-8 byte order mark', async () => {
    expect((await fetchWith('\ufeff{"access_token":"tok-bom","expires_in":3600}')).token).toBe('tok-bom');
  });
});

describe('fetchOAuthToken: an endpoint that is not there', () => {
  it('404 (a shop domain or region the vendor does not have) is the credentials to fix (auth: CREDENTIALS_INVALID), not a refusal of the input', async () => {
    status = 404;
    body = '{"errors":"Not Found"}';
    try {
      const err = await fetchOAuthToken({
        label: 'Test',
        url: `${url}/token`,
        headers: {},
        body: '{}',
        endpoints: emulatorEndpoints(url),
        rateLimitBackoffMs: 1_000,
        urlFromCredentials: true,
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TokenFetchError);
      expect((err as TokenFetchError).outcome).toMatchObject({ ok: false, kind: 'auth', vendorStatus: 404 });
    } finally {
      status = 200;
    }
  });

  it("404 from a URL the deployment configures (Amazon's AMAZON_LWA_URL) is no fault of the org's credentials: a refusal", async () => {
    status = 404;
    body = '{"error":"not_found"}';
    try {
      const err = await fetchOAuthToken({ label: 'LWA', url: `${url}/token`, headers: {}, body: '{}', endpoints: emulatorEndpoints(url), rateLimitBackoffMs: 1_000 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((err as TokenFetchError).outcome).toMatchObject({ ok: false, kind: 'rejected', vendorStatus: 404 });
    } finally {
      status = 200;
    }
  });
});

describe('fetchOAuthToken: the error code names the failure, not only the status', () => {
  async function outcomeFor(s: number, raw: string, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
    status = s;
    body = raw;
    const prev = extraHeaders;
    extraHeaders = headers;
    try {
      const err = await fetchOAuthToken({ label: 'LWA', url: `${url}/token`, headers: {}, body: '{}', endpoints: emulatorEndpoints(url), rateLimitBackoffMs: 1_000 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TokenFetchError);
      return (err as TokenFetchError).outcome as unknown as Record<string, unknown>;
    } finally {
      status = 200;
      extraHeaders = prev;
    }
  }

  it('server_error / temporarily_unavailable at a 400 or 403 (RFC 6749 puts token errors at 400): the server failing for now, not the credentials', async () => {
    for (const s of [400, 401, 403]) {
      for (const code of ['server_error', 'temporarily_unavailable']) {
        const out = await outcomeFor(s, JSON.stringify({ error: code, error_description: 'The service is temporarily unavailable' }));
        expect(out, `${s} ${code}`).toMatchObject({ ok: false, kind: 'server_error', vendorStatus: s, requestSent: false });
        expect(out.message, `${s} ${code}`).toContain(`(${code})`);
      }
    }
    // A 429 naming temporarily_unavailable (LWA's throttle) is still a rate limit, its wait kept.
    expect(await outcomeFor(429, '{"error":"temporarily_unavailable"}', { 'retry-after': '2' })).toMatchObject({ kind: 'rate_limited', retryAfterMs: 2_000 });
    // Its Retry-After is kept.
    expect(await outcomeFor(400, '{"error":"temporarily_unavailable"}', { 'retry-after': '3' })).toMatchObject({ kind: 'server_error', retryAfterMs: 3_000 });
  });

  it('the credentials codes stay CREDENTIALS_INVALID (auth), as does a 400 with no code or a code it does not know', async () => {
    for (const [s, raw] of [
      [400, '{"error":"invalid_grant","error_description":"The request has an invalid grant parameter : refresh_token"}'],
      [401, '{"error":"invalid_client","error_description":"Client authentication failed"}'],
      [400, '{"error":"unauthorized_client"}'],
      [400, '{"error":"Server_Error"}'],
      [400, 'not json'],
    ] as const) {
      expect(await outcomeFor(s, raw), raw).toMatchObject({ kind: 'auth', vendorStatus: s });
    }
  });
});
