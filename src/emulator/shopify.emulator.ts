/**
 * Shopify GraphQL Admin API, as far as the gateway uses it (VENDORS.md §1):
 * POST /admin/api/{version}/graphql.json with {query, variables}, and the
 * token endpoint POST /admin/oauth/access_token: the client-credentials grant (Dev Dashboard
 * apps) and the refresh-token grant of expiring offline tokens (public apps). Operations
 * are recognised from the query text (no GraphQL parser): `refundCreate`,
 * `orderUpdate`, `order(`, `product(`. Every GraphQL answer carries
 * `extensions.cost` as the real API does.
 */
import type { EmulatedVendor, EmuRequest, EmuResponse, FaultSpec } from './emulator.types.js';
import type { FaultResponder, InFlightTracker } from './vendor-emulator.js';
import { randomBytes } from 'node:crypto';
import {
  seedShopifyOrders,
  seedShopifyProducts,
  SHOPIFY_EMULATOR_CLIENT_ID,
  SHOPIFY_EMULATOR_CLIENT_SECRET,
  SHOPIFY_EMULATOR_REFRESH_TOKEN,
  SHOPIFY_EMULATOR_TOKEN,
  type EmuOrder,
  type EmuProduct,
  type EmuTransactionStatus,
} from './shopify.fixtures.js';
import { type ShopifyStore, executeShopifyGraphql, idempotencyKeyOf, shopifyQueryCost } from './shopify.operations.js';
import { ShopifyRefundDesk } from './shopify.refund-desk.js';
import { shopifyStatusResponse, shopifyThrottledResponse } from './shopify.errors.js';
import { recordMintedSecret } from './minted-secrets.js';

export { shopifyQueryCost } from './shopify.operations.js';

const PATH = /^\/admin\/api\/([^/]+)\/graphql\.json$/;
const TOKEN_PATH = '/admin/oauth/access_token';
/** Client-credentials tokens last about 24 h (VENDORS.md §1.1). */
export const SHOPIFY_GRANTED_TOKEN_SECONDS = 86_399;
/** Expiring offline access tokens last an hour (VENDORS.md §1.1). */
export const SHOPIFY_OFFLINE_TOKEN_SECONDS = 3_600;
const VERSION = /^\d{4}-(01|04|07|10)$/;
/** Oldest first. An older well-formed version falls forward to the oldest (VENDORS.md §1.1). */
const SUPPORTED_VERSIONS = ['2025-10', '2026-01', '2026-04', '2026-07', '2026-10'];

export function resolveShopifyVersion(requested: string): string | undefined {
  if (requested === 'unstable' || SUPPORTED_VERSIONS.includes(requested)) return requested;
  if (VERSION.test(requested) && requested < SUPPORTED_VERSIONS[0]) return SUPPORTED_VERSIONS[0];
  return undefined;
}

export class ShopifyEmulator implements EmulatedVendor, FaultResponder, InFlightTracker {
  readonly vendor = 'shopify' as const;
  private token = SHOPIFY_EMULATOR_TOKEN;
  private orders: Map<number, EmuOrder> = seedShopifyOrders();
  private products: Map<number, EmuProduct> = seedShopifyProducts();
  private readonly refunds = new ShopifyRefundDesk();
  /** Tokens issued by the client-credentials grant, with when each expires (ms since epoch). */
  private readonly granted = new Map<string, number>();
  /** Access scopes the emulated app lacks (revokeScope): the fields they guard come back null with ACCESS_DENIED. */
  private readonly missingScopes = new Set<string>();
  /**
   * Refresh tokens of the public app's install, each with the one it replaced. Using one retires its
   * predecessor ("retained until the app begins using its replacement") and any successor issued
   * earlier and never used; a retired or unknown one answers invalid_grant.
   */
  private refreshTokens = new Map<string, { predecessor: string | null; successor: string | null }>([[SHOPIFY_EMULATOR_REFRESH_TOKEN, { predecessor: null, successor: null }]]);
  /** Refresh-token grants answered 200, for assertions. */
  refreshGrants = 0;
  /** Every refresh and access token the refresh grant handed out (leak scans look for them). */
  readonly issuedSecrets: string[] = [];

  get accessToken(): string {
    return this.token;
  }

  setAccessToken(token: string): void {
    this.token = token;
  }

  /** The live fixture (mutations visible), for assertions. */
  order(id: number | string): EmuOrder | undefined {
    return this.orders.get(Number(id));
  }

  refundCount(orderId: number | string): number {
    return this.orders.get(Number(orderId))?.refunds.length ?? 0;
  }

  /**
   * The refunds made from now until reset carry refund transactions in `status` (SUCCESS by default):
   * PENDING, FAILURE, ERROR, AWAITING_RESPONSE, UNKNOWN (VENDORS.md §1.8), or a status Shopify may add later.
   * The refund is made all the same; its amount stays held unless the status is FAILURE.
   */
  setRefundTransactionStatus(status: EmuTransactionStatus): void {
    this.refunds.transactionStatus = status;
  }

  /** The app loses an access scope until reset (a merchant who did not grant it). */
  revokeScope(scope: 'read_customers'): void {
    this.missingScopes.add(scope);
  }

  /** Every token the grant issued stops working now (as after ~24 h, or a revoked install): a 401 from then on. */
  expireGrantedTokens(): void {
    for (const token of this.granted.keys()) this.granted.set(token, 0);
  }

  /** A merchant installs the public app again: a new grant, whose first refresh token is returned. */
  installApp(): string {
    const token = `shprt_${randomBytes(16).toString('hex')}`;
    this.refreshTokens.set(token, { predecessor: null, successor: null });
    this.issuedSecrets.push(token);
    recordMintedSecret('Shopify refresh token (emulator, installApp)', token);
    return token;
  }

  /** Whether a refresh token would be accepted now. */
  refreshTokenValid(token: string): boolean {
    return this.refreshTokens.has(token);
  }

  /** The refresh token the install would take next: the newest one issued (the seed before any refresh). */
  get latestRefreshToken(): string {
    return [...this.refreshTokens.keys()].at(-1)!;
  }

  reset(): void {
    this.token = SHOPIFY_EMULATOR_TOKEN;
    this.granted.clear();
    this.refreshTokens = new Map([[SHOPIFY_EMULATOR_REFRESH_TOKEN, { predecessor: null, successor: null }]]);
    this.refreshGrants = 0;
    this.issuedSecrets.length = 0;
    this.missingScopes.clear();
    this.orders = seedShopifyOrders();
    this.products = seedShopifyProducts();
    this.refunds.reset();
  }

  handles(req: EmuRequest): boolean {
    return req.path.startsWith('/admin/api/') || req.path === TOKEN_PATH;
  }

  handle(req: EmuRequest): EmuResponse {
    if (req.path === TOKEN_PATH) return this.grant(req);
    const match = PATH.exec(req.path);
    const version = match ? resolveShopifyVersion(match[1]) : undefined;
    if (!version || req.method !== 'POST') return { status: 404, body: { errors: 'Not Found' } };
    const headers = { 'x-shopify-api-version': version };
    if (!this.accepts(req.headers['x-shopify-access-token'])) {
      const denied = shopifyStatusResponse(401);
      return { ...denied, headers: { ...denied.headers, ...headers } };
    }

    const isGraphqlBody = (req.headers['content-type'] ?? '').includes('application/graphql');
    const body = (isGraphqlBody ? { query: req.rawBody.toString('utf8') } : req.json) as { query?: unknown; variables?: unknown } | undefined;
    if (!body || typeof body.query !== 'string' || body.query.trim() === '') {
      return { status: 400, headers, body: { errors: { query: 'Required parameter missing or invalid' } } };
    }
    const variables = (body.variables && typeof body.variables === 'object' ? body.variables : {}) as Record<string, unknown>;
    const result = executeShopifyGraphql(this.store, body.query, variables, version);
    const cost = {
      requestedQueryCost: result.cost,
      actualQueryCost: result.errors ? null : result.cost,
      // Stateless bucket: the emulator never throttles by itself (the benchmark
      // would trip it); the `throttled` fault scripts that instead.
      throttleStatus: { maximumAvailable: 2000, currentlyAvailable: 2000 - result.cost, restoreRate: 100 },
    };
    const out: Record<string, unknown> = {};
    if (result.errors) out.errors = result.errors;
    if (result.data !== undefined) out.data = result.data;
    out.extensions = { cost };
    return { status: 200, headers, body: out };
  }

  private accepts(token: string | undefined): boolean {
    if (token === undefined) return false;
    if (token === this.token) return true;
    const expiresAt = this.granted.get(token);
    return expiresAt !== undefined && Date.now() < expiresAt;
  }

  /**
   * The token endpoint (VENDORS.md §1.1), JSON bodies:
   * - {client_id, client_secret, grant_type: "client_credentials"} → {access_token, scope, expires_in};
   * - {client_id, client_secret, grant_type: "refresh_token", refresh_token} → {access_token, expires_in,
   *   refresh_token, refresh_token_expires_in, scope}: an expiring offline token, and the refresh token
   *   that replaces the one used.
   * Refusals take OAuth's shape (error codes assumed).
   */
  private grant(req: EmuRequest): EmuResponse {
    if (req.method !== 'POST') return { status: 404, body: { errors: 'Not Found' } };
    const body = (req.json ?? {}) as Record<string, unknown>;
    if (body.grant_type !== 'client_credentials' && body.grant_type !== 'refresh_token') {
      return { status: 400, body: { error: 'unsupported_grant_type', error_description: 'grant_type must be client_credentials or refresh_token' } };
    }
    if (body.client_id !== SHOPIFY_EMULATOR_CLIENT_ID || body.client_secret !== SHOPIFY_EMULATOR_CLIENT_SECRET) {
      return { status: 400, body: { error: 'invalid_client', error_description: 'Client authentication failed' } };
    }
    if (body.grant_type === 'refresh_token') return this.refresh(body.refresh_token);
    const token = `shpat_${randomBytes(16).toString('hex')}`;
    this.granted.set(token, Date.now() + SHOPIFY_GRANTED_TOKEN_SECONDS * 1000);
    recordMintedSecret('Shopify access token (emulator, client credentials)', token);
    return { status: 200, body: { access_token: token, scope: 'read_orders,write_orders,read_products', expires_in: SHOPIFY_GRANTED_TOKEN_SECONDS } };
  }

  private refresh(used: unknown): EmuResponse {
    const entry = typeof used === 'string' ? this.refreshTokens.get(used) : undefined;
    if (typeof used !== 'string' || !entry) {
      return { status: 400, body: { error: 'invalid_grant', error_description: 'The provided refresh token is invalid, expired or revoked.' } };
    }
    // The app has begun using this token: the one it replaced goes, and so does a replacement of it never used (lost answer).
    if (entry.predecessor) this.refreshTokens.delete(entry.predecessor);
    if (entry.successor) this.refreshTokens.delete(entry.successor);
    entry.predecessor = null;
    const next = `shprt_${randomBytes(16).toString('hex')}`;
    entry.successor = next;
    this.refreshTokens.set(next, { predecessor: used, successor: null });
    const token = `shpat_${randomBytes(16).toString('hex')}`;
    this.granted.set(token, Date.now() + SHOPIFY_OFFLINE_TOKEN_SECONDS * 1000);
    this.refreshGrants++;
    this.issuedSecrets.push(next, token);
    recordMintedSecret('Shopify refresh token (emulator, rotated)', next);
    recordMintedSecret('Shopify access token (emulator, refreshed)', token);
    return {
      status: 200,
      body: { access_token: token, expires_in: SHOPIFY_OFFLINE_TOKEN_SECONDS, refresh_token: next, refresh_token_expires_in: 7_776_000, scope: 'read_orders,write_orders,read_products' },
    };
  }

  faultResponse(fault: FaultSpec, req: EmuRequest): EmuResponse | undefined {
    // THROTTLED-in-a-200 is GraphQL's way only; the token endpoint is plain HTTP and throttles with
    // 429 + Retry-After like REST (VENDORS.md §1.4; §5 lists 429 as the token endpoints' retryable answer).
    // Its answers carry no API version, as it is not versioned.
    if (fault.kind === 'throttled' && req.path === TOKEN_PATH) return shopifyStatusResponse(429);
    const requested = PATH.exec(req.path)?.[1];
    const version = (requested && resolveShopifyVersion(requested)) ?? SUPPORTED_VERSIONS[SUPPORTED_VERSIONS.length - 2];
    const base = fault.kind === 'throttled' ? shopifyThrottledResponse(this.costOf(req)) : shopifyStatusResponse(fault.status ?? 500);
    return { ...base, headers: { ...base.headers, 'x-shopify-api-version': version } };
  }

  /** A refundCreate under way holds its @idempotent key: a resend meanwhile is "in progress" (VENDORS.md §1.9). */
  beginProcessing(req: EmuRequest): () => void {
    const body = req.json as { query?: unknown; variables?: unknown } | undefined;
    const query = typeof body?.query === 'string' ? body.query : '';
    const variables = (body?.variables && typeof body.variables === 'object' ? body.variables : {}) as Record<string, unknown>;
    const key = query.includes('refundCreate') ? idempotencyKeyOf(query, variables) : undefined;
    return typeof key === 'string' && key !== '' ? this.refunds.begin(key) : () => undefined;
  }

  private get store(): ShopifyStore {
    return { orders: this.orders, products: this.products, refunds: this.refunds, missingScopes: this.missingScopes };
  }

  private costOf(req: EmuRequest): number {
    const query = (req.json as { query?: unknown } | undefined)?.query;
    return typeof query === 'string' ? shopifyQueryCost(query) : 10;
  }
}
