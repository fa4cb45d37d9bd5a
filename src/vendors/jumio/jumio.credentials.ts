/**
 * The org's Jumio integration config (API.md §7). Region and account id end up
 * in host names and URL paths, so both are checked against strict shapes. The
 * account id is the default for calls that name no account.
 */
import type { VendorEndpoints } from '../vendor-handler.js';

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
const ACCOUNT_ID = /^[A-Za-z0-9-]{1,64}$/;

function nonEmpty(v: unknown): v is string {
  return typeof v === 'string' && v.trim() !== '';
}

/** Returns the credentials, or the name of the first field that is missing or invalid. */
export function parseJumioCredentials(raw: Record<string, unknown>): JumioCredentials | { invalidField: string } {
  if (!nonEmpty(raw.clientId)) return { invalidField: 'clientId' };
  if (!nonEmpty(raw.clientSecret)) return { invalidField: 'clientSecret' };
  if (!REGIONS.includes(raw.region as JumioRegion)) return { invalidField: 'region' };
  if (typeof raw.accountId !== 'string' || !ACCOUNT_ID.test(raw.accountId)) return { invalidField: 'accountId' };
  return { clientId: raw.clientId, clientSecret: raw.clientSecret, region: raw.region as JumioRegion, accountId: raw.accountId };
}

export function jumioAuthBaseUrl(endpoints: VendorEndpoints, region: JumioRegion): string {
  return (endpoints.jumioAuthBaseUrl ?? `https://auth.${region}.jumio.ai`).replace(/\/+$/, '');
}

export function jumioRetrievalBaseUrl(endpoints: VendorEndpoints, region: JumioRegion): string {
  return (endpoints.jumioRetrievalBaseUrl ?? `https://retrieval.${region}.jumio.ai`).replace(/\/+$/, '');
}
