/**
 * Jumio OAuth2 client-credentials token (VENDORS.md §3.1): HTTP Basic with the
 * portal's client id and secret, 60-minute bearer tokens.
 */
import { fetchOAuthToken } from '../auth/oauth-token.js';
import { tokenCacheKey, type FetchedToken } from '../auth/token-cache.js';
import type { VendorEndpoints } from '../vendor-handler.js';
import { jumioAuthBaseUrl, type JumioCredentials } from './jumio.credentials.js';

/** One cached token per (auth host, client); no secret in the key. */
export function jumioCacheKey(endpoints: VendorEndpoints, creds: JumioCredentials): string {
  return tokenCacheKey('jumio', jumioAuthBaseUrl(endpoints, creds.region), creds.clientId, creds.clientSecret);
}

export function fetchJumioToken(endpoints: VendorEndpoints, creds: JumioCredentials): Promise<FetchedToken> {
  const basic = Buffer.from(`${creds.clientId}:${creds.clientSecret}`, 'utf8').toString('base64');
  return fetchOAuthToken({
    label: 'Jumio',
    url: `${jumioAuthBaseUrl(endpoints, creds.region)}/oauth2/token`,
    headers: { Authorization: `Basic ${basic}`, 'Content-Type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials',
    endpoints,
    urlFromCredentials: true,
    // The auth endpoint allows 10 requests/s per tenant (VENDORS.md §3.3).
    rateLimitBackoffMs: 100,
  });
}
