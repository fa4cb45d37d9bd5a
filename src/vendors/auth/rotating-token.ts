/**
 * A grant whose refresh token the vendor replaces on every use (Shopify's
 * expiring offline tokens, VENDORS.md §1.1). Unlike a client-credentials or
 * LWA grant, whoever refreshes must keep the replacement, or the next refresh
 * fails: so the state lives in the database (encrypted), every replica reads
 * the access token from there, and only one replica at a time refreshes.
 */
import type { FetchedToken } from './token-cache.js';

export interface RotatingGrant {
  orgId: string;
  integration: 'shopify';
  /** Names the grant an admin configured (a digest, no secret): configuring another one starts over. */
  grantId: string;
  /** The refresh token as configured; used until a replacement has been stored. */
  configuredRefreshToken: string;
}

/** One refresh at the vendor: the access token, its lifetime and the replacement refresh token. */
export type RefreshGrant = (refreshToken: string) => Promise<FetchedToken>;

export interface ObtainOptions {
  /** An access token the vendor just refused: not handed out again, even if it looks unexpired. */
  refused?: string;
  /**
   * Told true while the fetch does the gateway's own work (the store's database, waiting for another replica's
   * renewal) and false while it calls the vendor and once it is done: a caller whose budget runs out meanwhile says
   * whose time it was.
   */
  onLocalWork?: (local: boolean) => void;
}

export interface RotatingTokenStore {
  /**
   * A usable access token: the stored one while it is valid, otherwise one
   * refresh through `refresh`, its result stored before it is handed out.
   * Failures are TokenFetchErrors (nothing reached the vendor's API).
   */
  obtain(grant: RotatingGrant, refresh: RefreshGrant, opts?: ObtainOptions): Promise<FetchedToken>;
}
