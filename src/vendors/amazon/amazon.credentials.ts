/**
 * The org's Amazon integration config (API.md §7), checked before use: the
 * region picks the SP-API host, so it must be one of the three known values
 * and never free text that could steer the request elsewhere.
 */
import type { VendorEndpoints } from '../vendor-handler.js';

export type AmazonRegion = 'na' | 'eu' | 'fe';

export interface AmazonCredentials {
  clientId: string;
  clientSecret: string;
  refreshToken: string;
  region: AmazonRegion;
  marketplaceId?: string;
}

const REGIONS: readonly AmazonRegion[] = ['na', 'eu', 'fe'];

function nonEmpty(v: unknown): v is string {
  return typeof v === 'string' && v.trim() !== '';
}

/** Returns the credentials, or the name of the first field that is missing or invalid. */
export function parseAmazonCredentials(raw: Record<string, unknown>): AmazonCredentials | { invalidField: string } {
  if (!nonEmpty(raw.clientId)) return { invalidField: 'clientId' };
  if (!nonEmpty(raw.clientSecret)) return { invalidField: 'clientSecret' };
  if (!nonEmpty(raw.refreshToken)) return { invalidField: 'refreshToken' };
  if (!REGIONS.includes(raw.region as AmazonRegion)) return { invalidField: 'region' };
  const creds: AmazonCredentials = {
    clientId: raw.clientId,
    clientSecret: raw.clientSecret,
    refreshToken: raw.refreshToken,
    region: raw.region as AmazonRegion,
  };
  if (nonEmpty(raw.marketplaceId)) creds.marketplaceId = raw.marketplaceId;
  return creds;
}

export function spapiBaseUrl(endpoints: VendorEndpoints, region: AmazonRegion): string {
  const base = endpoints.amazonSpapiBaseUrl ?? `https://sellingpartnerapi-${region}.amazon.com`;
  return base.replace(/\/+$/, '');
}
