import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emulatorEndpoints } from '../handler.spec-support.js';
import { fetchOAuthToken, MAX_LIFETIME_SEC } from './oauth-token.js';

/** A token endpoint answering 200 with whatever body the test set last. */
let body = '';
let server: http.Server;
let url = '';

beforeAll(async () => {
  server = http.createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
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
