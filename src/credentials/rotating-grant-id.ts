import { shopifyGrant } from '../vendors/shopify/shopify.auth.js';
import type { ShopifyConnection } from '../vendors/shopify/shopify.connection.js';
import type { IntegrationType } from './integration-credential.entity.js';

/** The grant id of a vendor_tokens row of Shopify credentials without a refresh token: no handler's grant has it. */
const NO_ROTATING_GRANT = 'none';

/**
 * The grant id the vendor_tokens row of a valid config carries, or null for an integration that never has a rotating
 * grant: Shopify's refresh-token grant by the id the handler gives it (a digest of the shop, the app and the configured
 * refresh token), or NO_ROTATING_GRANT for Shopify credentials that set up none.
 */
export function rotatingGrantId(orgId: string, type: IntegrationType, config: Record<string, unknown>): string | null {
  if (type !== 'shopify') return null;
  if (config.accessToken !== undefined || config.refreshToken === undefined) return NO_ROTATING_GRANT;
  const { shopDomain, clientId, clientSecret, refreshToken } = config as Record<string, string>;
  // shopifyGrant reads only the shop domain of the connection.
  return shopifyGrant(orgId, { shopDomain } as ShopifyConnection, { kind: 'refresh', clientId, clientSecret, refreshToken }).grantId;
}
