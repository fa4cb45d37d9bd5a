import { Inject, Injectable, Logger, type BeforeApplicationShutdown } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { DecryptionError, EnvelopeCipher, type Envelope } from '../common/crypto/envelope-cipher.js';
import { failedStatementFields, isDatabaseUnavailable } from '../common/errors/database-errors.js';
import { newId } from '../common/ids.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { Sql } from '../db/sql.js';
import type { ObtainOptions, RefreshGrant, RotatingGrant, RotatingTokenStore } from '../vendors/auth/rotating-token.js';
import { TokenFetchError, type FetchedToken } from '../vendors/auth/token-cache.js';
import { credentialAad } from './credentials.service.js';
import { rotatingGrantId } from './rotating-grant-id.js';
import { LEASE_RELEASE_RETRY, retryWhileUnavailable } from '../common/errors/unavailable-retry.js';

/** Associated data: a stored token state only decrypts for the org and integration it was written for. */
export const vendorTokenAad = (orgId: string, integration: string): string => `vendor-token:${orgId}:${integration}`;

/**
 * What is stored, encrypted: the refresh token to use next, the access token it bought, and the refresh
 * token used to get them. Shopify keeps that one valid until its replacement is used, and it is the way
 * back when a duplicate of an earlier refresh (an answer lost at the edge, applied later) has retired the
 * replacement stored here.
 */
interface TokenState {
  refreshToken: string;
  accessToken: string;
  previousRefreshToken?: string;
  /**
   * The grant the state was bought under, sealed with it: the row's grant_id column is plain text, so an earlier
   * grant's envelope copied back under the current grant id (a writer of vendor_tokens, without the master key) was
   * handed out as the current grant's token. Absent in state written before it was sealed in (read as before).
   */
  grantId?: string;
  /**
   * The access token's lifetime as the vendor gave it (expires_in), for the refresh margin: a token living two minutes
   * or less is refreshed at half its life, not at once (TokenCache does the same). Absent in older state (the full margin).
   */
  lifetimeSec?: number;
}

interface Row {
  grant_id: string;
  key_id: string | null;
  iv: Buffer | null;
  ciphertext: Buffer | null;
  auth_tag: Buffer | null;
  /** seconds the stored access token has left, by the database's clock (one clock for every replica) */
  remaining_sec: number | null;
}

/**
 * A stored access token this close to its expiry is refreshed instead (Amazon's own SDK uses 60 s for LWA); one that
 * lived less than twice that, at half its life: otherwise it would never be read from the row at all.
 */
const MARGIN_SEC = 60;
/** How often a replica waiting for another one's refresh looks again. */
const POLL_MS = 100;
/**
 * The lease: two vendor timeouts (a refused stored refresh token is followed by a second refresh with the one it
 * replaced) plus this, for writing the result.
 */
const LEASE_SLACK_MS = 5_000;

const COLUMNS = `grant_id, key_id, iv, ciphertext, auth_tag, extract(epoch FROM access_expires_at - now())::float8 AS remaining_sec`;

/**
 * Rotating refresh-token grants, shared by the replicas through `vendor_tokens`
 * (one row per org × integration, deleted with the credentials; a PUT of credentials of another grant
 * makes it a row of the new grant with no state):
 * - only a caller of the row's grant reads, leases or writes it. A call still under a replaced grant
 *   (it loaded the credentials before the PUT) refreshes with its configured refresh token and stores
 *   nothing, so the old grant's rotated refresh token is not kept once the PUT has committed; a caller
 *   of the org's current grant takes back a row another grant still holds (adoptStaleRow);
 * - the access token is read from the row while it has more than a minute left;
 * - to refresh, a replica takes the row's lease (one conditional upsert), calls
 *   the vendor with no transaction open, then stores the replacement refresh
 *   token and the new access token and drops the lease (conditional on still
 *   holding it); the others wait for the row meanwhile;
 * - if the answer or its write is lost, the stored refresh token is the one
 *   used last: Shopify keeps a used refresh token valid until its replacement
 *   is used, so the next refresh still works.
 */
@Injectable()
export class VendorTokenStore implements RotatingTokenStore, BeforeApplicationShutdown {
  private readonly log = new Logger('VendorTokens');
  private readonly leaseMs: number;
  /** How long a stop waits for this replica's renewals under way: they are at the vendor, bounded as a call is. */
  private readonly stopWaitMs: number;
  /**
   * Renewals under way holding the row's lease: a refresh ahead of expiry runs with no request waiting for it (see
   * beforeApplicationShutdown). A fetch only waiting for another replica's renewal is not one: it has nothing to store.
   */
  private readonly renewing = new Set<Promise<unknown>>();
  /** Set by a stop: a fetch waiting for another replica's renewal gives up at once rather than hold the stop. */
  private stopping = false;

  constructor(
    private readonly sql: Sql,
    private readonly cipher: EnvelopeCipher,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.leaseMs = 2 * config.VENDOR_TIMEOUT_MS + LEASE_SLACK_MS;
    this.stopWaitMs = config.VENDOR_TIMEOUT_MS;
  }

  /**
   * Before the pool closes, this replica's renewals under way are let finish (VENDOR_TIMEOUT_MS at most, as a call at
   * a vendor): one cut off at a stop (a refresh ahead of expiry, which no request waits for) could neither store the
   * new refresh token Shopify had just issued nor give back its lease, and every other replica's calls of the org
   * waited for the lease, 35 s, and failed. Fetches only waiting for another replica's renewal end at once: waited
   * for, they held the stop for that replica's whole lease (35 s with the defaults, past compose's 30 s grace).
   */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping = true;
    if (this.renewing.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.renewing]), new Promise<void>((r) => (timer = setTimeout(r, this.stopWaitMs)))]);
    clearTimeout(timer);
  }

  async obtain(grant: RotatingGrant, refresh: RefreshGrant, opts: ObtainOptions = {}): Promise<FetchedToken> {
    // The store's own work (its statements, the wait for another replica's renewal) but for the refresh at the vendor.
    const mark = opts.onLocalWork;
    const atVendor: RefreshGrant = mark
      ? async (refreshToken) => {
          mark(false);
          try {
            return await refresh(refreshToken);
          } finally {
            mark(true);
          }
        }
      : refresh;
    mark?.(true);
    try {
      return await this.obtainOrThrow(grant, atVendor, opts);
    } catch (err) {
      if (err instanceof TokenFetchError) throw err;
      const code = (err as { code?: unknown } | null)?.code;
      // The token row names the credentials (deleted with them): an admin's DELETE while this call waited for the
      // renewal leaves it no row to write. Nothing was sent; the credentials are gone, the database is fine.
      if (code === '23503') {
        throw new TokenFetchError({ ok: false, kind: 'auth', requestSent: false, local: true, message: `the org's ${grant.integration} credentials were deleted while this call waited for its access token; nothing was sent` });
      }
      // The gateway's own trouble, not the vendor's: nothing was sent to the vendor's API, and the vendor's
      // breaker does not count it. A code, never the statement's text.
      const unavailable = isDatabaseUnavailable(err);
      this.log.warn({ orgId: grant.orgId, integration: grant.integration, ...failedStatementFields(err) }, 'token store failed');
      throw new TokenFetchError({
        ok: false,
        kind: 'network',
        requestSent: false,
        local: true,
        message: `the ${grant.integration} access token could not be read or stored${unavailable ? ': the database is unavailable' : ''}`,
      });
    } finally {
      mark?.(false);
    }
  }

  private async obtainOrThrow(grant: RotatingGrant, refresh: RefreshGrant, opts: ObtainOptions): Promise<FetchedToken> {
    const deadline = performance.now() + this.leaseMs; // a wait: the monotonic clock, whatever the wall clock does
    for (;;) {
      const [row] = await this.sql.prepared<Row>(`SELECT ${COLUMNS} FROM vendor_tokens WHERE org_id = $1 AND integration_type = $2`, [grant.orgId, grant.integration]);
      if (row && row.grant_id !== grant.grantId) {
        if (await this.adoptStaleRow(grant, row.grant_id)) continue;
        return await this.refreshReplaced(grant, refresh);
      }
      const stored = this.usable(row, grant, opts.refused);
      if (stored) return stored;
      const lease = newId();
      const [claimed] = await this.sql.prepared<Row>(
        `INSERT INTO vendor_tokens AS v (org_id, integration_type, grant_id, lease_id, lease_until)
         VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
         ON CONFLICT (org_id, integration_type) DO UPDATE SET lease_id = EXCLUDED.lease_id, lease_until = EXCLUDED.lease_until
           WHERE v.grant_id = EXCLUDED.grant_id AND (v.lease_until IS NULL OR v.lease_until < now())
         RETURNING ${COLUMNS.replace('grant_id', 'v.grant_id')}`,
        [grant.orgId, grant.integration, grant.grantId, lease, this.leaseMs / 1000],
      );
      if (claimed) {
        const renewal = this.refreshHolding(grant, lease, claimed, refresh, opts);
        this.renewing.add(renewal);
        void renewal.catch(() => undefined).finally(() => this.renewing.delete(renewal));
        return await renewal;
      }
      // Another replica is refreshing: its token lands in the row. (Or a PUT has just replaced the grant: the next read sees it.)
      if (this.stopping || performance.now() + POLL_MS >= deadline) {
        const why = this.stopping ? 'the gateway is stopping while another replica renews' : 'another replica is still renewing';
        throw new TokenFetchError({ ok: false, kind: 'timeout', requestSent: false, local: true, message: `${why} the ${grant.integration} access token` });
      }
      await sleep(POLL_MS);
    }
  }

  private async refreshHolding(grant: RotatingGrant, lease: string, claimed: Row, refresh: RefreshGrant, opts: ObtainOptions): Promise<FetchedToken> {
    // Refreshed by someone else between the read and the claim.
    const stored = this.usable(claimed, grant, opts.refused);
    if (stored) {
      await this.release(grant, lease);
      return stored;
    }
    const current = this.decrypt(claimed, grant);
    let used = current?.refreshToken ?? grant.configuredRefreshToken;
    let got: FetchedToken;
    try {
      try {
        got = await refresh(used);
      } catch (err) {
        // Refused (invalid_grant): a late duplicate of the refresh that bought it may have retired it. The one before still works then.
        const previous = current?.previousRefreshToken;
        // A 404 is no refusal of the token (the endpoint is not there): the previous one would meet it too.
        if (!previous || !(err instanceof TokenFetchError) || err.outcome.kind !== 'auth' || err.outcome.vendorStatus === 404) throw err;
        this.log.warn({ orgId: grant.orgId, integration: grant.integration }, 'stored refresh token refused: trying the one it replaced');
        used = previous;
        got = await refresh(used);
      }
    } catch (err) {
      await this.release(grant, lease).catch(() => undefined);
      throw err;
    }
    const state: TokenState = { refreshToken: got.refreshToken ?? used, accessToken: got.token, previousRefreshToken: used, grantId: grant.grantId, lifetimeSec: got.expiresInSec };
    const env = this.cipher.encryptJson(state, vendorTokenAad(grant.orgId, grant.integration));
    try {
      const stored = await this.sql.prepared(
        `UPDATE vendor_tokens SET key_id = $4, iv = $5, ciphertext = $6, auth_tag = $7,
                access_expires_at = now() + make_interval(secs => $8), lease_id = NULL, lease_until = NULL, updated_at = now()
          WHERE org_id = $1 AND integration_type = $2 AND grant_id = $3 AND lease_id = $9 RETURNING 1 AS stored`,
        [grant.orgId, grant.integration, grant.grantId, env.keyId, env.iv, env.ciphertext, env.authTag, got.expiresInSec, lease],
      );
      // The refresh outlasted the lease and another replica took it (its own refresh is what the row keeps), or a PUT
      // replaced the grant meanwhile (and dropped the lease).
      if (stored.length === 0) this.log.warn({ orgId: grant.orgId, integration: grant.integration }, 'refreshed access token not stored: the lease ran out or the grant was replaced first');
    } catch (err) {
      // The token is good; only its replacement refresh token is lost, and the one stored still works once more.
      this.log.warn({ orgId: grant.orgId, integration: grant.integration, ...failedStatementFields(err, 'write failed') }, 'refreshed access token not stored');
      // Held to its end, the lease would make every other replica wait that long for a token never stored, then fail.
      await this.release(grant, lease).catch(() => undefined);
    }
    return { token: got.token, expiresInSec: got.expiresInSec };
  }

  /**
   * A row of another grant while the org's credentials are of the caller's: left by an earlier version, whose
   * call under a replaced grant could still store its state after the PUT (or by such a replica during a rolling
   * deploy). Its state is the replaced grant's, so it is dropped and the row becomes the current grant's; otherwise
   * every refresh under the current grant would go without storing, for good. Rare: only on a grant mismatch.
   */
  private async adoptStaleRow(grant: RotatingGrant, rowGrantId: string): Promise<boolean> {
    const [creds] = await this.sql.prepared<{ key_id: string; iv: Buffer; ciphertext: Buffer; auth_tag: Buffer }>(
      'SELECT key_id, iv, ciphertext, auth_tag FROM integration_credentials WHERE org_id = $1 AND integration_type = $2',
      [grant.orgId, grant.integration],
    );
    if (!creds) return false;
    let current: string | null;
    try {
      const config = this.cipher.decryptJson<Record<string, unknown>>({ keyId: creds.key_id, iv: creds.iv, ciphertext: creds.ciphertext, authTag: creds.auth_tag }, credentialAad(grant.orgId, grant.integration));
      current = rotatingGrantId(grant.orgId, grant.integration, config);
    } catch (err) {
      if (!(err instanceof DecryptionError)) throw err;
      return false;
    }
    if (current !== grant.grantId) return false;
    const adopted = await this.sql.prepared(
      `UPDATE vendor_tokens SET grant_id = $3, key_id = NULL, iv = NULL, ciphertext = NULL, auth_tag = NULL, access_expires_at = NULL,
              lease_id = NULL, lease_until = NULL, updated_at = now()
        WHERE org_id = $1 AND integration_type = $2 AND grant_id = $4 AND (lease_until IS NULL OR lease_until < now()) RETURNING 1 AS adopted`,
      [grant.orgId, grant.integration, grant.grantId, rowGrantId],
    );
    if (adopted.length > 0) this.log.warn({ orgId: grant.orgId, integration: grant.integration }, "a replaced grant's token state was dropped: the row is the current grant's again");
    return adopted.length > 0;
  }

  /** A call admitted before a PUT of another grant: it may finish with a token, but the row is the new grant's. */
  private async refreshReplaced(grant: RotatingGrant, refresh: RefreshGrant): Promise<FetchedToken> {
    this.log.warn({ orgId: grant.orgId, integration: grant.integration }, 'the grant was replaced: refreshing without storing');
    const got = await refresh(grant.configuredRefreshToken);
    return { token: got.token, expiresInSec: got.expiresInSec };
  }

  /** Tried again through a short outage: held on, the lease kept every replica from renewing the org's token for its whole length. */
  private async release(grant: RotatingGrant, lease: string): Promise<void> {
    await retryWhileUnavailable(
      () => this.sql.prepared('UPDATE vendor_tokens SET lease_id = NULL, lease_until = NULL WHERE org_id = $1 AND integration_type = $2 AND lease_id = $3', [
        grant.orgId,
        grant.integration,
        lease,
      ]),
      LEASE_RELEASE_RETRY,
    );
  }

  /** The stored access token, if it belongs to this grant, is not the refused one and has more than the margin left. */
  private usable(row: Row | undefined, grant: RotatingGrant, refused: string | undefined): FetchedToken | null {
    if (!row || row.grant_id !== grant.grantId || row.remaining_sec === null || row.remaining_sec <= 0) return null;
    const state = this.decrypt(row, grant);
    if (!state || state.accessToken === refused) return null;
    const lifetime = state.lifetimeSec;
    const margin = typeof lifetime === 'number' && Number.isFinite(lifetime) && lifetime > 0 ? Math.min(MARGIN_SEC, lifetime / 2) : MARGIN_SEC;
    if (row.remaining_sec <= margin) return null;
    return { token: state.accessToken, expiresInSec: row.remaining_sec };
  }

  /** null when there is none or no loaded key opens it (then the configured refresh token is tried). */
  private decrypt(row: Row, grant: RotatingGrant): TokenState | null {
    if (!row.key_id || !row.iv || !row.ciphertext || !row.auth_tag) return null;
    const env: Envelope = { keyId: row.key_id, iv: row.iv, ciphertext: row.ciphertext, authTag: row.auth_tag };
    try {
      const state = this.cipher.decryptJson<TokenState>(env, vendorTokenAad(grant.orgId, grant.integration));
      if (state.grantId === undefined || state.grantId === grant.grantId) return state;
      this.log.warn({ orgId: grant.orgId, integration: grant.integration }, "stored token state is another grant's: using the configured refresh token");
      return null;
    } catch (err) {
      if (!(err instanceof DecryptionError)) throw err;
      this.log.warn({ orgId: grant.orgId, integration: grant.integration }, 'stored token state could not be decrypted: using the configured refresh token');
      return null;
    }
  }
}
