/**
 * Turns an org's Shopify credentials (API.md §7) into the GraphQL endpoint and
 * token. The shop domain is org-supplied text that ends up in a URL, so it is
 * checked against Shopify's domain shape before anything is built from it:
 * otherwise an org could point the gateway (and its token) at any host.
 */
import type { VendorEndpoints } from '../vendor-handler.js';

const SHOP_DOMAIN = /^[a-z0-9][a-z0-9-]*\.myshopify\.com$/;
const API_VERSION = /^(\d{4}-(01|04|07|10)|unstable)$/;
// Shopify tokens are printable ASCII; anything else would be refused by node:http as a header value anyway.
const TOKEN = /^[\x21-\x7e]{1,512}$/;

export interface ShopifyConnection {
  graphqlUrl: string;
  accessToken: string;
  apiVersion: string;
}

/** A connection, or a message naming the bad field (never its value). */
export function resolveShopifyConnection(credentials: Record<string, unknown>, endpoints: VendorEndpoints): ShopifyConnection | string {
  const { shopDomain, accessToken, apiVersion } = credentials;
  if (typeof shopDomain !== 'string' || !SHOP_DOMAIN.test(shopDomain)) return 'shopify credentials: shopDomain must look like <shop>.myshopify.com';
  if (typeof accessToken !== 'string' || !TOKEN.test(accessToken)) return 'shopify credentials: accessToken is missing or malformed';
  const version = apiVersion === undefined || apiVersion === null || apiVersion === '' ? endpoints.shopifyApiVersion : apiVersion;
  if (typeof version !== 'string' || !API_VERSION.test(version)) return 'shopify credentials: apiVersion must look like YYYY-01|04|07|10';
  const base = (endpoints.shopifyBaseUrl ?? `https://${shopDomain}`).replace(/\/+$/, '');
  return { graphqlUrl: `${base}/admin/api/${version}/graphql.json`, accessToken, apiVersion: version };
}
