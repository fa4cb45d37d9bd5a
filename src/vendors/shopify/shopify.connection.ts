/**
 * Turns an org's Shopify credentials (API.md §7) into the GraphQL endpoint and
 * how to authenticate to it. The shop domain is org-supplied text that ends up
 * in a URL, so it is checked against Shopify's domain shape before anything is
 * built from it: otherwise an org could point the gateway (and its token) at
 * any host.
 *
 * Two kinds of credentials (VENDORS.md §1.1):
 * - `accessToken`: a long-lived Admin API token (legacy custom apps, `shpat_…`);
 * - `clientId` + `clientSecret`: an app from the Dev Dashboard installed on the
 *   org's own store (no new legacy custom apps since 1 Jan 2026). The gateway
 *   exchanges them for a token (client-credentials grant, about 24 h) and
 *   renews it before it expires, or when Shopify refuses it;
 * - `clientId` + `clientSecret` + `refreshToken`: a public app's expiring
 *   offline token (mandatory from 1 Jan 2027). The gateway refreshes the 1 h
 *   access token with the refresh token, which Shopify replaces on every use:
 *   the replacement is kept encrypted in the database (vendor_tokens), shared
 *   by every replica.
 */
import type { VendorEndpoints } from '../vendor-handler.js';

const SHOP_DOMAIN = /^[a-z0-9][a-z0-9-]*\.myshopify\.com$/;
const API_VERSION = /^(\d{4}-(01|04|07|10)|unstable)$/;
// Shopify tokens, client ids and secrets are printable ASCII; anything else would be refused by node:http as a header value anyway.
const PRINTABLE = /^[\x21-\x7e]{1,512}$/;
// A refresh token only travels in a JSON body; the credentials schema allows up to 2048 characters.
const REFRESH_TOKEN = /^[\x21-\x7e]{8,2048}$/;

export type ShopifyAuth =
  | { kind: 'token'; accessToken: string }
  | { kind: 'client'; clientId: string; clientSecret: string }
  | { kind: 'refresh'; clientId: string; clientSecret: string; refreshToken: string };

export interface ShopifyConnection {
  shopDomain: string;
  graphqlUrl: string;
  /** POST here with the client id and secret for a token (client-credentials or refresh-token grant). */
  tokenUrl: string;
  auth: ShopifyAuth;
  apiVersion: string;
}

/** A connection, or a message naming the bad field (never its value). */
export function resolveShopifyConnection(credentials: Record<string, unknown>, endpoints: VendorEndpoints): ShopifyConnection | string {
  const { shopDomain, accessToken, clientId, clientSecret, refreshToken, apiVersion } = credentials;
  if (typeof shopDomain !== 'string' || !SHOP_DOMAIN.test(shopDomain)) return 'shopify credentials: shopDomain must look like <shop>.myshopify.com';
  let auth: ShopifyAuth;
  if (accessToken !== undefined) {
    if (typeof accessToken !== 'string' || !PRINTABLE.test(accessToken)) return 'shopify credentials: accessToken is missing or malformed';
    auth = { kind: 'token', accessToken };
  } else {
    if (typeof clientId !== 'string' || !PRINTABLE.test(clientId)) return 'shopify credentials: accessToken, or clientId and clientSecret, are missing or malformed';
    if (typeof clientSecret !== 'string' || !PRINTABLE.test(clientSecret)) return 'shopify credentials: clientSecret is missing or malformed';
    if (refreshToken === undefined) auth = { kind: 'client', clientId, clientSecret };
    else if (typeof refreshToken !== 'string' || !REFRESH_TOKEN.test(refreshToken)) return 'shopify credentials: refreshToken is malformed';
    else auth = { kind: 'refresh', clientId, clientSecret, refreshToken };
  }
  const version = apiVersion === undefined || apiVersion === null || apiVersion === '' ? endpoints.shopifyApiVersion : apiVersion;
  if (typeof version !== 'string' || !API_VERSION.test(version)) return 'shopify credentials: apiVersion must look like YYYY-01|04|07|10';
  const base = (endpoints.shopifyBaseUrl ?? `https://${shopDomain}`).replace(/\/+$/, '');
  return { shopDomain, graphqlUrl: `${base}/admin/api/${version}/graphql.json`, tokenUrl: `${base}/admin/oauth/access_token`, auth, apiVersion: version };
}
