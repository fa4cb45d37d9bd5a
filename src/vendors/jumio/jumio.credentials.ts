/**
 * The org's Jumio integration config (API.md §7). Region and account id end up
 * in host names and URL paths, so both are checked against strict shapes. The
 * account id is the default for calls that name no account.
 */
import type { VendorEndpoints } from '../vendor-handler.js';
import { UUID } from './jumio.tools.js';

export type JumioRegion = 'amer-1' | 'emea-1' | 'apac-1';

export interface JumioCredentials {
  clientId: string;
  clientSecret: string;
  region: JumioRegion;
  /**
   * The org's default account. Jumio KYX keeps one account per end user, so a call names the execution's own
   * account (kyc.get_status accountId) and this one is used only when it does not.
   */
  accountId: string;
}

const REGIONS: readonly JumioRegion[] = ['amer-1', 'emea-1', 'apac-1'];

/**
 * A client id with ':' is no HTTP Basic user-id (RFC 7617 §2): the token request joins `clientId:clientSecret`, and the
 * auth server would split at the id's colon. Refused here and by the PUT (credential-schemas.ts NOT_BLANK_NO_COLON).
 */
function isJumioClientId(v: unknown): v is string {
  return nonEmpty(v) && !v.includes(':');
}

function nonEmpty(v: unknown): v is string {
  return typeof v === 'string' && v.trim() !== '';
}

/** Returns the credentials, or the name of the first field that is missing or invalid. */
export function parseJumioCredentials(raw: Record<string, unknown>): JumioCredentials | { invalidField: string } {
  if (!isJumioClientId(raw.clientId)) return { invalidField: 'clientId' };
  if (!nonEmpty(raw.clientSecret)) return { invalidField: 'clientSecret' };
  if (!REGIONS.includes(raw.region as JumioRegion)) return { invalidField: 'region' };
  // A UUID, as a call's own accountId (jumio.tools.ts), and in lower case as that one is (canonicalParams): the PUT
  // stores it so, and one stored in upper case before it did is read the same.
  if (typeof raw.accountId !== 'string' || !UUID.test(raw.accountId)) return { invalidField: 'accountId' };
  return { clientId: raw.clientId, clientSecret: raw.clientSecret, region: raw.region as JumioRegion, accountId: raw.accountId.toLowerCase() };
}

export function jumioAuthBaseUrl(endpoints: VendorEndpoints, region: JumioRegion): string {
  return (endpoints.jumioAuthBaseUrl ?? `https://auth.${region}.jumio.ai`).replace(/\/+$/, '');
}

export function jumioRetrievalBaseUrl(endpoints: VendorEndpoints, region: JumioRegion): string {
  return (endpoints.jumioRetrievalBaseUrl ?? `https://retrieval.${region}.jumio.ai`).replace(/\/+$/, '');
}
