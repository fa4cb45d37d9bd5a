/**
 * Shopify's token endpoint, https://{shop}.myshopify.com/admin/oauth/access_token
 * (VENDORS.md §1.1), JSON bodies:
 * - client-credentials grant: an app's client id and secret buy an Admin API
 *   token of about 24 h;
 * - refresh-token grant (expiring offline tokens of public apps): the refresh
 *   token buys a 1 h access token and a replacement refresh token.
 */
import { fetchOAuthToken } from '../auth/oauth-token.js';
import type { RotatingGrant } from '../auth/rotating-token.js';
import { tokenCacheKey, type FetchedToken } from '../auth/token-cache.js';
import type { VendorEndpoints } from '../vendor-handler.js';
import type { ShopifyConnection } from './shopify.connection.js';

type ClientAuth = Extract<ShopifyConnection['auth'], { kind: 'client' }>;
type RefreshAuth = Extract<ShopifyConnection['auth'], { kind: 'refresh' }>;

/**
 * One cached token per (shop, app); no secret in the key. The shop is named on its own: with SHOPIFY_BASE_URL set,
 * every shop's token URL is the same address, and one shop's token must not be used for another's calls.
 */
export function shopifyCacheKey(conn: ShopifyConnection, auth: ClientAuth): string {
  return tokenCacheKey('shopify', conn.tokenUrl, conn.shopDomain, auth.clientId, auth.clientSecret);
}

export function fetchShopifyToken(endpoints: VendorEndpoints, conn: ShopifyConnection, auth: ClientAuth): Promise<FetchedToken> {
  return fetchOAuthToken({
    label: 'Shopify',
    url: conn.tokenUrl,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ client_id: auth.clientId, client_secret: auth.clientSecret, grant_type: 'client_credentials' }),
    endpoints,
    urlFromCredentials: true,
    // Shopify's own client waits 1 s after a 429 that names no wait (VENDORS.md §1.6).
    rateLimitBackoffMs: 1_000,
  });
}

/** The grant an org configured: its id is a digest of the shop, the app and the configured refresh token. */
export function shopifyGrant(orgId: string, conn: ShopifyConnection, auth: RefreshAuth): RotatingGrant {
  return { orgId, integration: 'shopify', grantId: tokenCacheKey('shopify-grant', conn.shopDomain, auth.clientId, auth.refreshToken), configuredRefreshToken: auth.refreshToken };
}

/** One refresh of an expiring offline token; the answer carries the replacement refresh token. */
export function refreshShopifyToken(endpoints: VendorEndpoints, conn: ShopifyConnection, auth: RefreshAuth, refreshToken: string): Promise<FetchedToken> {
  return fetchOAuthToken({
    label: 'Shopify',
    url: conn.tokenUrl,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ client_id: auth.clientId, client_secret: auth.clientSecret, refresh_token: refreshToken, grant_type: 'refresh_token' }),
    endpoints,
    urlFromCredentials: true,
    rateLimitBackoffMs: 1_000,
  });
}
