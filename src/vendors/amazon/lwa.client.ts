/**
 * Login with Amazon: exchanges the org's long-lived refresh token (Atzr|...) for
 * a one-hour access token (Atza|...) sent as `x-amz-access-token` (VENDORS.md §2.1).
 * The documented body is form-encoded; LWA also takes JSON, we use the documented one.
 */
import { fetchOAuthToken } from '../auth/oauth-token.js';
import { tokenCacheKey, type FetchedToken } from '../auth/token-cache.js';
import type { VendorEndpoints } from '../vendor-handler.js';
import type { AmazonCredentials } from './amazon.credentials.js';

/** One cached token per (LWA endpoint, app, seller authorisation); no secret in the key. */
export function lwaCacheKey(endpoints: VendorEndpoints, creds: AmazonCredentials): string {
  return tokenCacheKey('amazon-lwa', endpoints.amazonLwaUrl, creds.clientId, creds.clientSecret, creds.refreshToken);
}

export function fetchLwaToken(endpoints: VendorEndpoints, creds: AmazonCredentials): Promise<FetchedToken> {
  const body = new URLSearchParams({
    grant_type: 'refresh_token',
    refresh_token: creds.refreshToken,
    client_id: creds.clientId,
    client_secret: creds.clientSecret,
  }).toString();
  return fetchOAuthToken({
    label: 'LWA',
    url: endpoints.amazonLwaUrl,
    headers: { 'Content-Type': 'application/x-www-form-urlencoded;charset=UTF-8' },
    body,
    endpoints,
    // LWA documents no limit and sends no Retry-After: wait a second, as for a 1 request/s plan.
    rateLimitBackoffMs: 1000,
  });
}
