/**
 * Emulated Login with Amazon + SP-API Orders v0 (VENDORS.md §2), with the
 * observed quirks: 403 (not 401) for every token problem, 200 {"payload":{}}
 * for a well-formed unknown order id, 429 QuotaExceeded without Retry-After.
 * SP-API calls without a User-Agent are refused (400 InvalidInput, see orders()).
 * getOrder answers as it does to a caller without a Restricted Data Token
 * (the gateway never asks for one): the restricted address and buyer parts
 * of the fixtures are left out.
 * Orders v2026-01-01 getOrder reads the same fixtures (amazon.orders-v2026.ts)
 * behind the same token checks and faults; an unknown order is a 404 there.
 */
import { randomBytes } from 'node:crypto';
import type { EmulatedVendor, EmuRequest, EmuResponse, FaultSpec } from './emulator.types.js';
import type { FaultResponder } from './vendor-emulator.js';
import { AMAZON_FIXTURE_ITEMS, AMAZON_FIXTURE_ORDERS, AMAZON_ITEMS_PAGE_SIZE } from './amazon.fixtures.js';
import { orderV2026, parseIncludedData } from './amazon.orders-v2026.js';
import { recordMintedSecret } from './minted-secrets.js';

export const AMAZON_EMULATOR_CREDENTIALS = {
  clientId: 'amzn1.application-oa2-client.emulator',
  clientSecret: 'amzn1.oa2-cs.v1.7f3e9a2c5b1d4e6f8091a2b3c4d5e6f7081928374655647382910a1b2c3d0001',
  refreshToken: 'Atzr|emulator-refresh-token-0001',
} as const;

const ORDER_PATH = /^\/orders\/v0\/orders\/([^/]+)(\/orderItems)?$/;
const ORDER_PATH_V2026 = /^\/orders\/2026-01-01\/orders\/([^/]+)$/;
const ORDER_ID = /^\d{3}-\d{7}-\d{7}$/;
/** The longest User-Agent SP-API's docs allow (VENDORS.md §2.1). */
const USER_AGENT_MAX = 500;

/** What getOrder's ShippingAddress keeps without an RDT (VENDORS.md §2.2). */
const ADDRESS_WITHOUT_RDT = ['City', 'StateOrRegion', 'PostalCode', 'CountryCode'];
/** BuyerInfo parts that need an RDT (VENDORS.md §2.2); BuyerEmail (anonymised) does not. */
const BUYER_NEEDS_RDT = ['BuyerName', 'BuyerTaxInfo', 'PurchaseOrderNumber'];

/** A v0 fixture order as getOrder returns it to a caller without an RDT. */
function withoutRdt(order: Record<string, unknown>): Record<string, unknown> {
  const out = structuredClone(order);
  const address = out.ShippingAddress;
  if (typeof address === 'object' && address !== null) {
    out.ShippingAddress = Object.fromEntries(Object.entries(address).filter(([k]) => ADDRESS_WITHOUT_RDT.includes(k)));
  }
  const buyer = out.BuyerInfo;
  if (typeof buyer === 'object' && buyer !== null) {
    out.BuyerInfo = Object.fromEntries(Object.entries(buyer).filter(([k]) => !BUYER_NEEDS_RDT.includes(k)));
  }
  return out;
}

/** SP-API answers every call with an `x-amzn-RequestId`, errors and successes alike (VENDORS.md §2.2). */
function requestId(): Record<string, string> {
  return { 'x-amzn-requestid': randomBytes(8).toString('hex') };
}

function spapiError(status: number, code: string, message: string, details = ''): EmuResponse {
  return { status, headers: requestId(), body: { errors: [{ code, message, details }] } };
}

/** A malformed order id, in v0 and v2026 alike: 400 InvalidInput (VENDORS.md §2.3). */
function invalidOrderId(orderId: string): EmuResponse {
  return spapiError(400, 'InvalidInput', 'Invalid Input', `Invalid order id: ${orderId}`);
}

function lwaError(status: number, error: string, description: string): EmuResponse {
  return { status, body: { error_description: description, error } };
}

export class AmazonEmulator implements EmulatedVendor, FaultResponder {
  readonly vendor = 'amazon' as const;
  /** LWA token exchanges answered (successful or not). */
  tokenRequests = 0;
  private tokenLifetimeSec = 3600;
  /** What `x-amzn-RateLimit-Limit` says on 200/400/404 (the Orders v0 plan: 0.5 requests/s). */
  private rateLimit = '0.5';
  private readonly tokens = new Map<string, { expiresAt: number; expired: boolean; revoked: boolean }>();
  /** getOrderItems pagination bug, when set: the page at `from` answers the NextToken of the page at `to`. */
  private itemsLoop: { from: number; to: number } | undefined;

  /** Every /orders/ path: one API Gateway does not route answers 403 MissingAuthenticationToken, not a 404 (VENDORS.md §2.3). */
  handles(req: EmuRequest): boolean {
    return req.path === '/auth/o2/token' || req.path.startsWith('/orders/');
  }

  handle(req: EmuRequest): EmuResponse {
    return req.path === '/auth/o2/token' ? this.token(req) : this.orders(req);
  }

  reset(): void {
    this.tokenRequests = 0;
    this.tokenLifetimeSec = 3600;
    this.rateLimit = '0.5';
    this.tokens.clear();
    this.itemsLoop = undefined;
  }

  setTokenLifetime(sec: number): void {
    this.tokenLifetimeSec = sec;
  }

  /** Every token issued so far now answers "has expired". */
  expireAllTokens(): void {
    for (const t of this.tokens.values()) t.expired = true;
  }

  /**
   * Every token issued so far is now refused as "revoked, malformed or invalid"
   * (e.g. the seller re-authorised the app): SP-API does not say "expired" then.
   */
  revokeAllTokens(): void {
    for (const t of this.tokens.values()) t.revoked = true;
  }

  /**
   * A getOrderItems pagination bug seen in the wild: the page at item offset
   * `from` answers the NextToken of the page at `to` (<= from), one already
   * handed out, instead of the next page's. {from: 2, to: 2}: the second
   * page answers its own token again, forever. Undefined: pages as normal.
   */
  loopItemsPages(loop: { from: number; to: number } | undefined): void {
    this.itemsLoop = loop;
  }

  /** The live rate (requests/s) answers report in `x-amzn-RateLimit-Limit`. */
  setRateLimit(rate: number): void {
    this.rateLimit = String(rate);
  }

  faultResponse(fault: FaultSpec, req: EmuRequest): EmuResponse | undefined {
    const status = fault.kind === 'throttled' ? 429 : (fault.status ?? 500);
    if (req.path === '/auth/o2/token') {
      return status === 429
        ? lwaError(429, 'temporarily_unavailable', 'Too many requests')
        : lwaError(status, 'server_error', 'The authorization server encountered an unexpected error.');
    }
    switch (status) {
      case 400:
        return spapiError(400, 'InvalidInput', 'Invalid Input');
      case 403:
        return spapiError(403, 'Unauthorized', 'Access to requested resource is denied.');
      case 404:
        return spapiError(404, 'NotFound', 'Resource not found.');
      case 429:
        return spapiError(429, 'QuotaExceeded', 'You exceeded your quota for the requested resource.');
      case 503:
        return spapiError(503, 'ServiceUnavailable', 'Service temporarily unavailable.');
      default:
        return status >= 500 ? spapiError(status, 'InternalFailure', 'We encountered an internal error. Please try again.') : undefined;
    }
  }

  private token(req: EmuRequest): EmuResponse {
    this.tokenRequests += 1;
    if (req.method !== 'POST') return lwaError(405, 'invalid_request', 'Method not allowed');
    // LWA documents form encoding; Amazon's Java SDK sends JSON and it works too.
    const get = (name: string): string | undefined => {
      if (req.form) return req.form.get(name) ?? undefined;
      const j = req.json as Record<string, unknown> | undefined;
      return typeof j?.[name] === 'string' ? j[name] : undefined;
    };
    const c = AMAZON_EMULATOR_CREDENTIALS;
    if (get('grant_type') !== 'refresh_token') return lwaError(400, 'unsupported_grant_type', 'The authorization grant type is not supported');
    if (get('client_id') !== c.clientId || get('client_secret') !== c.clientSecret) {
      return lwaError(401, 'invalid_client', 'Client authentication failed');
    }
    if (get('refresh_token') !== c.refreshToken) {
      return lwaError(400, 'invalid_grant', 'The request has an invalid grant parameter : refresh_token');
    }
    const token = `Atza|emu-${randomBytes(24).toString('base64url')}`;
    this.tokens.set(token, { expiresAt: Date.now() + this.tokenLifetimeSec * 1000, expired: false, revoked: false });
    recordMintedSecret('Amazon access token (emulator)', token);
    return { status: 200, body: { access_token: token, refresh_token: c.refreshToken, token_type: 'bearer', expires_in: this.tokenLifetimeSec } };
  }

  private orders(req: EmuRequest): EmuResponse {
    const agent = req.headers['user-agent'];
    // SP-API's docs require a User-Agent (at most 500 characters, VENDORS.md §2.1); the refusal is the
    // emulator's own strictness (VENDORS.md gives no answer for it), so our client is proven to send one:
    // 400 InvalidInput in the ErrorList shape, as for a malformed request, before the token is looked at.
    if (!agent?.trim()) return spapiError(400, 'InvalidInput', 'Invalid Input', 'User-Agent header is required.');
    if (agent.length > USER_AGENT_MAX) return spapiError(400, 'InvalidInput', 'Invalid Input', `User-Agent header is longer than ${USER_AGENT_MAX} characters.`);
    const token = req.headers['x-amz-access-token'];
    const denied = 'Access to requested resource is denied.';
    if (!token) return spapiError(403, 'Unauthorized', denied, 'Access token is missing in the request header.');
    const issued = this.tokens.get(token);
    if (!issued || issued.revoked) return spapiError(403, 'Unauthorized', denied, 'The access token you provided is revoked, malformed or invalid.');
    if (issued.expired || Date.now() >= issued.expiresAt) {
      return spapiError(403, 'Unauthorized', denied, 'The access token you provided has expired.');
    }
    const v2026 = ORDER_PATH_V2026.exec(req.path);
    if (req.method === 'GET' && v2026) return this.orderV2026(v2026[1], req.query);
    const m = ORDER_PATH.exec(req.path);
    if (req.method !== 'GET' || !m) return spapiError(403, 'MissingAuthenticationToken', 'Missing Authentication Token');
    const orderId = m[1];
    if (!ORDER_ID.test(orderId)) return this.withRate(invalidOrderId(orderId));
    return m[2] ? this.orderItems(orderId, req.query.get('NextToken')) : this.order(orderId);
  }

  private order(orderId: string): EmuResponse {
    const order = AMAZON_FIXTURE_ORDERS[orderId];
    // Observed live: a well-formed unknown id answers 200 with an empty payload.
    return this.withRate({ status: 200, body: { payload: order ? withoutRdt(order) : {} } });
  }

  private orderItems(orderId: string, nextToken: string | null): EmuResponse {
    const all = AMAZON_FIXTURE_ITEMS[orderId];
    if (!all) return this.withRate(spapiError(404, 'NotFound', 'Resource not found.', `Order ${orderId} not found`));
    let offset = 0;
    if (nextToken !== null) {
      const [tokenOrder, at] = Buffer.from(nextToken, 'base64url').toString('utf8').split('|');
      offset = Number(at);
      if (tokenOrder !== orderId || !Number.isInteger(offset) || offset <= 0 || offset >= all.length) {
        return this.withRate(spapiError(400, 'InvalidInput', 'Invalid Input', 'Invalid NextToken'));
      }
    }
    const page = all.slice(offset, offset + AMAZON_ITEMS_PAGE_SIZE);
    const next = offset === this.itemsLoop?.from ? this.itemsLoop.to : offset + AMAZON_ITEMS_PAGE_SIZE;
    const payload: Record<string, unknown> = { AmazonOrderId: orderId, OrderItems: structuredClone(page) };
    if (next < all.length) payload.NextToken = Buffer.from(`${orderId}|${next}`, 'utf8').toString('base64url');
    return this.withRate({ status: 200, body: { payload } });
  }

  /** Orders v2026-01-01 getOrder: no `payload` wrapper; a bad id or includedData is a 400, an unknown order a 404 (the model). */
  private orderV2026(orderId: string, query: URLSearchParams): EmuResponse {
    if (!ORDER_ID.test(orderId)) return this.withRate(invalidOrderId(orderId));
    const want = parseIncludedData(query);
    if (!want) return this.withRate(spapiError(400, 'InvalidInput', 'Invalid Input', 'Invalid includedData'));
    const order = AMAZON_FIXTURE_ORDERS[orderId];
    if (!order) return this.withRate(spapiError(404, 'NotFound', 'Resource not found.', `Order ${orderId} not found`));
    return this.withRate({ status: 200, body: orderV2026(order, AMAZON_FIXTURE_ITEMS[orderId] ?? [], want) });
  }

  /** 200, 400 and 404 carry the live rate; 429 and 5xx do not [src]. A request id comes with all of them. */
  private withRate(res: EmuResponse): EmuResponse {
    return { ...res, headers: { ...requestId(), ...res.headers, 'x-amzn-ratelimit-limit': this.rateLimit } };
  }
}
