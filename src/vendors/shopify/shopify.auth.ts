/**
 * Shopify's client-credentials grant (VENDORS.md §1.1): an app's client id and
 * secret, POSTed as JSON to https://{shop}.myshopify.com/admin/oauth/access_token,
 * buy an Admin API token of about 24 h.
 */
import { fetchOAuthToken } from '../auth/oauth-token.js';
import { tokenCacheKey, type FetchedToken } from '../auth/token-cache.js';
import type { VendorEndpoints } from '../vendor-handler.js';
import type { ShopifyConnection } from './shopify.connection.js';

type ClientAuth = Extract<ShopifyConnection['auth'], { kind: 'client' }>;

/** One cached token per (shop, app); no secret in the key. */
export function shopifyCacheKey(conn: ShopifyConnection, auth: ClientAuth): string {
  return tokenCacheKey('shopify', conn.tokenUrl, auth.clientId, auth.clientSecret);
}

export function fetchShopifyToken(endpoints: VendorEndpoints, conn: ShopifyConnection, auth: ClientAuth): Promise<FetchedToken> {
  return fetchOAuthToken({
    label: 'Shopify',
    url: conn.tokenUrl,
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ client_id: auth.clientId, client_secret: auth.clientSecret, grant_type: 'client_credentials' }),
    endpoints,
    // Shopify's own client waits 1 s after a 429 that names no wait (VENDORS.md §1.6).
    rateLimitBackoffMs: 1_000,
  });
}
