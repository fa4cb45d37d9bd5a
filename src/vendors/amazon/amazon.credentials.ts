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

/**
 * The marketplaces each region's SP-API host serves, as Amazon publishes them (developer-docs.amazon.com/sp-api/docs/
 * marketplace-ids; VENDORS.md names the regions' countries only). No call reads marketplaceId (getOrder is by order
 * id): it is checked only so that a config naming another region's marketplace, or none Amazon has, is not stored.
 */
export const AMAZON_MARKETPLACES: Readonly<Record<AmazonRegion, readonly string[]>> = {
  // US, CA, MX, BR
  na: ['ATVPDKIKX0DER', 'A2EUQ1WTGCTBG2', 'A1AM78C64UM0Y8', 'A2Q3Y263D00KWC'],
  // IE, ES, UK, FR, BE, NL, DE, IT, SE, ZA, PL, EG, TR, SA, AE, IN
  eu: [
    'A28R8C7NBKEWEA', 'A1RKKUPIHCS9HS', 'A1F83G8C2ARO7P', 'A13V1IB3VIYZZH', 'AMEN7PMS3EDWL', 'A1805IZSGTT6HS', 'A1PA6795UKMFR9', 'APJ6JRA9NG5V4',
    'A2NODRKZP88ZB9', 'AE08WJ6YKNBMC', 'A1C3SOZRARQ6R3', 'ARBP9OOSHTCHU', 'A33AVAJ2PDY3EV', 'A17E79C6D8DWNP', 'A2VIGQ35RCS4UG', 'A21TJRUUN4KGV',
  ],
  // SG, AU, JP
  fe: ['A19VAU5U5O7RUS', 'A39IBJ37TRP1C6', 'A1VC38T7YXB528'],
};

/** Whether `marketplaceId` is one of the marketplaces `region` serves. */
export function isAmazonMarketplaceOf(region: AmazonRegion, marketplaceId: unknown): boolean {
  return typeof marketplaceId === 'string' && AMAZON_MARKETPLACES[region].includes(marketplaceId);
}

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
  // Kept as stored: the PUT refuses another region's marketplace (credentialsProblem), but no call reads it, so a
  // config stored before that check keeps working.
  if (nonEmpty(raw.marketplaceId)) creds.marketplaceId = raw.marketplaceId;
  return creds;
}

export function spapiBaseUrl(endpoints: VendorEndpoints, region: AmazonRegion): string {
  const base = endpoints.amazonSpapiBaseUrl ?? `https://sellingpartnerapi-${region}.amazon.com`;
  return base.replace(/\/+$/, '');
}
