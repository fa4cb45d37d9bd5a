/**
 * Shopify over the GraphQL Admin API (REST is legacy, VENDORS.md §0). Every
 * action is one GraphQL request, except a refund, which first reads the
 * order's payments: Shopify needs the parent transaction's gateway. With the
 * order's refund lease, it reads them twice: once before taking the lease
 * (the org's credentials reach the shop), once under it (the payment picked).
 */
import { Logger } from '@nestjs/common';
import type { RotatingGrant, RotatingTokenStore } from '../auth/rotating-token.js';
import { credentialsCheckOf, TokenCache, TokenFetchError, tokenCacheKey, type AcquiredToken, type CredentialsCheck } from '../auth/token-cache.js';
import { failedOutcome, notSentAfterWait, standingAfterTokenWait, writeSendRoomMs, type FailedOutcome, type VendorCallContext, type VendorEndpoints, type VendorHandler, type VendorOutcome } from '../vendor-handler.js';
import { fetchShopifyToken, refreshShopifyToken, shopifyCacheKey, shopifyGrant } from './shopify.auth.js';
import { isRecord, postShopifyGraphql, type GraphqlResult } from './shopify.client.js';
import { resolveShopifyConnection, type ShopifyConnection } from './shopify.connection.js';
import { ORDER_NOTE_MUTATION, ORDER_QUERY, PRODUCT_QUERY, REFUND_CONTEXT_QUERY, refundMutation } from './shopify.graphql.js';
import { noteUpdateOutcome, orderLookupOutcome, productOutcome, refundCreateOutcome } from './shopify.outcomes.js';
import { buildRefundInput, pickRefundParent, refundAmountProblem, refundCurrency, refundCurrencyProblem, refundIdempotencyKey } from './shopify.refund.js';
import { forgetRefundParent, LEASE_TAKEN, MAY_STILL_RUN, mayStillRun, refundLeaseHolder, refundParentOf, SHOP_REACHED } from './shopify.refund-call.js';
import type { RefundLeaseKey, RefundLeases } from './shopify.refund-lease.js';
import { isShopifyId, SHOPIFY_ID_MAX, SHOPIFY_TOOLS } from './shopify.tools.js';

/** The id as a GID, or undefined: the schema and validate() already checked it, this guards the GID text itself. */
function gidOf(type: 'Order' | 'Product', id: unknown): string | undefined {
  return isShopifyId(id) ? `gid://shopify/${type}/${id}` : undefined;
}

/** The params that carry a Shopify id (each tool has at most one). */
const ID_PARAMS = ['orderId', 'productId'] as const;


/** One tool call's connection, and whether it has already renewed a refused token. */
interface ShopifyCall {
  conn: ShopifyConnection;
  signal: AbortSignal;
  refreshed: boolean;
  /** `<orgId>:shopify`: its tokens are forgotten when the org's credentials are deleted or replaced. */
  owner: string;
  /** An expiring offline token's grant (refresh-token credentials). */
  grant?: RotatingGrant;
  /** When the call's budget runs out (performance.now()): a mutation is not sent after a token wait without room for its answer. */
  deadline?: number;
  /** Whether the call's credentials are still the org's: no token is bought or sent with ones that moved on. */
  credentials?: CredentialsCheck;
  /** The tokens the call is handed (VendorCallContext.tokensUsed). */
  tokensUsed?: Set<string>;
  /** Whether the call may still send after it waited for a token request (GetTokenOptions.afterWait). */
  afterTokenWait?: () => Promise<FailedOutcome | undefined>;
}

/** An order a refund can be made against, as read (the payment is picked from it under the lease). */
interface RefundOrder {
  ok: true;
  order: Record<string, unknown>;
  currency: string | undefined;
  vendorStatus: number;
}

/** How many distinct version notices one process remembers (each is logged once). */
const NOTICES_MAX = 1_000;
const VERSION = /^(\d{4}-(01|04|07|10)|unstable)$/;
/** A deprecation reason as Shopify sent it before API 2025-04: a documentation address on shopify.dev. */
const DEPRECATION_REASON = /^https:\/\/shopify\.dev\/[A-Za-z0-9\-._~/%]{0,200}$/;
/**
 * One member of the reason as Shopify sends it from API 2025-04 ("will return the list of detected deprecations
 * instead of a generic URL", e.g. `Shop.products, Shop.productVariants`): a GraphQL schema coordinate — a type and a
 * field, perhaps an argument — of plain identifiers, nothing else (no free text reaches the log).
 */
const DEPRECATED_MEMBER = /^[A-Za-z_][A-Za-z0-9_]{0,63}(?:\.[A-Za-z_][A-Za-z0-9_]{0,63}){1,2}$/;
/** How many members of one reason are logged; the rest are counted. */
const DEPRECATED_MEMBERS_MAX = 20;

/**
 * What of an X-Shopify-API-Deprecated-Reason may be logged: a shopify.dev page (without its query or fragment: one
 * notice per page, however an upstream varies the rest), or the list of schema coordinates, sorted and without
 * repeats (one notice per set, in whatever order it came); anything else only as a placeholder.
 */
export function deprecationNamed(reason: string): string {
  const page = reason.split(/[?#]/)[0]!;
  if (DEPRECATION_REASON.test(page)) return page;
  if (reason.length <= 8_192) {
    const members = reason.split(',').map((m) => m.trim());
    if (members.every((m) => DEPRECATED_MEMBER.test(m))) {
      const sorted = [...new Set(members)].sort();
      const shown = sorted.slice(0, DEPRECATED_MEMBERS_MAX).join(', ');
      return sorted.length > DEPRECATED_MEMBERS_MAX ? `${shown} (+${sorted.length - DEPRECATED_MEMBERS_MAX} more)` : shown;
    }
  }
  return '(neither a shopify.dev address nor a list of schema fields: not logged)';
}

export class ShopifyHandler implements VendorHandler {
  readonly vendor = 'shopify' as const;
  readonly tools = SHOPIFY_TOOLS;
  private readonly log = new Logger('Shopify');
  private readonly notices = new Set<string>();
  /** Token cache keys whose rotating-grant fetch is doing the gateway's own work now (see token()). */
  private readonly localTokenWork = new Set<string>();

  constructor(
    private readonly endpoints: VendorEndpoints,
    /** Tokens bought with an app's client id and secret, shared by the org's calls. */
    private readonly tokens: TokenCache = new TokenCache(),
    /** Where rotating refresh tokens are kept, shared by the replicas (refresh-token credentials need it). */
    private readonly rotating?: RotatingTokenStore,
    /**
     * One refund in flight per order, shared by the replicas (VENDORS.md §1.9 point 6). The gateway
     * always has it (vendor-registry.ts); without it (a handler tested alone) refunds are not serialised.
     */
    private readonly refundLeases?: RefundLeases,
  ) {}

  validate(toolName: string, action: string, params: Record<string, unknown>): string | null {
    // The schema's pattern takes 19 digits; above 2^63 − 1 no Shopify object exists, so nothing is sent (and a
    // refund takes no lease) for an id that would come back as Shopify's failure instead of the caller's.
    for (const name of ID_PARAMS) {
      if (typeof params[name] === 'string' && !isShopifyId(params[name])) return `${name}: must be at most ${SHOPIFY_ID_MAX} (Shopify ids are 64-bit)`;
    }
    if (toolName === 'shopify_refund' && action === 'create' && typeof params.amount === 'string' && !/[1-9]/.test(params.amount)) {
      return 'amount must be greater than 0';
    }
    return null;
  }

  async execute(ctx: VendorCallContext): Promise<VendorOutcome> {
    const conn = resolveShopifyConnection(ctx.credentials, this.endpoints);
    if (typeof conn === 'string') return failedOutcome('auth', conn);
    const call: ShopifyCall = {
      conn,
      signal: ctx.signal,
      refreshed: false,
      owner: `${ctx.orgId}:shopify`,
      deadline: ctx.deadline,
      credentials: credentialsCheckOf(ctx),
      tokensUsed: ctx.tokensUsed,
      afterTokenWait: standingAfterTokenWait(ctx, 'shopify'),
    };
    if (conn.auth.kind === 'refresh') {
      if (!this.rotating) return failedOutcome('auth', 'shopify credentials: refresh tokens need the token store, which this process lacks');
      call.grant = shopifyGrant(ctx.orgId, conn, conn.auth);
    }
    const op = `${ctx.toolName}.${ctx.action}`;
    try {
      switch (op) {
        case 'order_lookup.lookup':
          return await this.lookupOrder(ctx, call);
        case 'shopify_query.get_product':
          return await this.getProduct(ctx, call);
        case 'shopify_order.add_note':
          return await this.addNote(ctx, call);
        case 'shopify_refund.create':
          return withReadSent(ctx, await this.createRefund(ctx, call));
        default:
          // The catalog and this switch disagree: a bug, not a vendor failure.
          throw new Error(`shopify handler has no action ${op}`);
      }
    } catch (err) {
      // No token: nothing reached the Admin API (requestSent false).
      if (err instanceof TokenFetchError) return err.outcome;
      throw err;
    }
  }

  /**
   * One GraphQL request with the call's token. A 401 to a token from the cache
   * (expired or revoked early) buys one new token and one resend: Shopify
   * refused the request before running it, so even a mutation is safe to send
   * again. A 401 to a token just issued is the credentials' fault. An expiring
   * offline token may come from the database (another replica refreshed it),
   * so any 401 to one buys one refresh, never handing out the refused token again.
   *
   * A mutation is sent after a token wait (a token bought for this call, or renewed after a 401) only with a quarter
   * of the call's budget left, as the executor retries a write (writeSendRoomMs): sent with less, its answer would
   * come past the deadline and a write Shopify never had, or cleanly refused (401), would end OUTCOME_UNKNOWN.
   * It is answered instead as a timeout before sending (failed VENDOR_TIMEOUT; a refund's lease is given back).
   */
  private async gql(call: ShopifyCall, query: string, variables: Record<string, unknown>, mutation?: string): Promise<GraphqlResult> {
    let refused: string | undefined;
    for (;;) {
      const { token, fresh } = await this.token(call, refused);
      const waited = refused !== undefined || (fresh && call.conn.auth.kind !== 'token');
      if (mutation !== undefined && waited && !this.roomToSend(call)) {
        const why = refused === undefined ? "the access token took the call's budget" : "renewing the access token Shopify refused (401) took the call's budget";
        return failedOutcome('timeout', `${why}; the write was not sent${refused === undefined ? '' : ' again'}`, undefined, undefined, false);
      }
      const res = await postShopifyGraphql(this.endpoints, call.conn.graphqlUrl, token, query, variables, call.signal, mutation, (h) => this.noticeVersion(call.conn.apiVersion, h));
      const renewable = call.conn.auth.kind === 'refresh' || (call.conn.auth.kind === 'client' && !fresh);
      if (!res.ok && res.vendorStatus === 401 && renewable && !call.refreshed) {
        call.refreshed = true;
        this.tokens.invalidate(this.cacheKey(call), token);
        refused = token;
        continue;
      }
      return res;
    }
  }

  /**
   * Shopify serves a version it no longer supports with the oldest one it
   * does ("fall forward", VENDORS.md §1.1) and says which in
   * X-Shopify-API-Version: answers may then differ from what the gateway was
   * written against. Logged once per requested → served pair, for ops to move
   * the version (SHOPIFY_API_VERSION, or the org's apiVersion).
   */
  private noticeVersion(requested: string, headers: Record<string, string>): void {
    this.noticeDeprecation(requested, headers['x-shopify-api-deprecated-reason']);
    const served = headers['x-shopify-api-version'];
    if (served === undefined || served === requested || !VERSION.test(served)) return;
    const key = `${requested}>${served}`;
    if (this.notices.has(key)) return;
    if (this.notices.size >= NOTICES_MAX) this.notices.clear();
    this.notices.add(key);
    this.log.warn({ requested, served }, 'Shopify served another API version than the one requested (no longer supported): move SHOPIFY_API_VERSION or the org\'s apiVersion forward');
  }

  /**
   * X-Shopify-API-Deprecated-Reason: the request used something Shopify will remove (a field, the version itself;
   * VENDORS.md §1.6). Logged once per version and reason; the reason only in the forms Shopify sends (deprecationNamed),
   * else only that the header came: a header's text is the vendor's, never logged as it is.
   */
  private noticeDeprecation(requested: string, reason: string | undefined): void {
    if (reason === undefined) return;
    const named = deprecationNamed(reason);
    const key = `${requested} deprecated ${named}`;
    if (this.notices.has(key)) return;
    if (this.notices.size >= NOTICES_MAX) this.notices.clear();
    this.notices.add(key);
    this.log.warn({ requested, reason: named }, 'Shopify flagged a request as using something deprecated (X-Shopify-API-Deprecated-Reason): check the queries against the API version before it is removed');
  }

  private token(call: ShopifyCall, refused?: string): Promise<AcquiredToken> {
    const { conn, grant } = call;
    const auth = conn.auth;
    if (auth.kind === 'token') return Promise.resolve({ token: auth.accessToken, fresh: true });
    if (auth.kind === 'client') return this.tokens.acquire(shopifyCacheKey(conn, auth), () => fetchShopifyToken(this.endpoints, conn, auth), {
        signal: call.signal,
        owner: call.owner,
        credentials: call.credentials,
        tokensUsed: call.tokensUsed,
        afterWait: call.afterTokenWait,
      });
    const store = this.rotating!;
    const key = this.cacheKey(call);
    // The fetch is shared by the calls of this key: whichever of them runs out of budget while the store does its own
    // work (another replica renewing the token, say) times out on the gateway's account, not Shopify's (no breaker).
    const onLocalWork = (local: boolean): void => void (local ? this.localTokenWork.add(key) : this.localTokenWork.delete(key));
    const fetcher = () => store.obtain(grant!, (refreshToken) => refreshShopifyToken(this.endpoints, conn, auth, refreshToken), { refused, onLocalWork });
    return this.tokens.acquire(key, fetcher, {
      signal: call.signal,
      waitIsLocal: () => this.localTokenWork.has(key),
      owner: call.owner,
      credentials: call.credentials,
      tokensUsed: call.tokensUsed,
      afterWait: call.afterTokenWait,
    });
  }

  /** Whether a write may still be sent: the call's deadline leaves room for its answer (none known: the signal bounds it). */
  private roomToSend(call: ShopifyCall): boolean {
    return call.deadline === undefined || call.deadline - performance.now() >= writeSendRoomMs(this.endpoints.timeoutMs);
  }

  /** The in-process cache key of the call's token (no secret in it). */
  private cacheKey(call: ShopifyCall): string {
    const auth = call.conn.auth;
    if (auth.kind === 'client') return shopifyCacheKey(call.conn, auth);
    return tokenCacheKey('shopify-grant-token', call.grant?.orgId ?? '', call.grant?.grantId ?? '');
  }

  private async lookupOrder(ctx: VendorCallContext, call: ShopifyCall): Promise<VendorOutcome> {
    const id = gidOf('Order', ctx.params.orderId);
    if (!id) return failedOutcome('rejected', 'orderId must be a numeric Shopify id');
    const res = await this.gql(call, ORDER_QUERY, { id });
    if (!res.ok) return res;
    return orderLookupOutcome(ctx, res);
  }

  private async getProduct(ctx: VendorCallContext, call: ShopifyCall): Promise<VendorOutcome> {
    const id = gidOf('Product', ctx.params.productId);
    if (!id) return failedOutcome('rejected', 'productId must be a numeric Shopify id');
    const res = await this.gql(call, PRODUCT_QUERY, { id });
    if (!res.ok) return res;
    return productOutcome(ctx, res);
  }

  private async addNote(ctx: VendorCallContext, call: ShopifyCall): Promise<VendorOutcome> {
    const id = gidOf('Order', ctx.params.orderId);
    const note = ctx.params.note;
    if (!id || typeof note !== 'string') return failedOutcome('rejected', 'orderId and note are required');
    // The final text is sent as-is on every attempt; that is what makes a resend harmless (VENDORS.md §1.7).
    const res = await this.gql(call, ORDER_NOTE_MUTATION, { input: { id, note } }, 'orderUpdate');
    if (!res.ok) return res;
    return noteUpdateOutcome(ctx, res, note);
  }

  private async createRefund(ctx: VendorCallContext, call: ShopifyCall): Promise<VendorOutcome> {
    const orderGid = gidOf('Order', ctx.params.orderId);
    const { amount } = ctx.params;
    if (!orderGid || typeof amount !== 'string') return failedOutcome('rejected', 'orderId and amount are required');

    // The order's lease is shared by every org whose credentials name the shop, so an org takes it only once its
    // credentials have been shown to reach the shop: the order read first, unleased (a read is safe at any time).
    // Otherwise an org naming another org's shop with a token the shop refuses would hold that shop's orders for as
    // long as its own failing token fetch or read takes. A refused cached token is renewed here, as on any read, and
    // a read that fails ends the call with nothing sent and no lease taken. Spent from the call's budget: the
    // lease's room check below sees the time it took. A refund the order read already rules out takes no lease either.
    if (this.refundLeases && ctx.scratch.get(SHOP_REACHED) !== true) {
      const first = await this.readRefundOrder(ctx, call, orderGid, amount);
      if (!first.ok) return first;
    }

    // The lease comes before the read the payment is picked from: it is picked from what is still refundable on each,
    // which the refund holding the lease may be about to change (a 30.00 refund of a 35.00 card leaves 5.00).
    const lease: RefundLeaseKey = { orgId: ctx.orgId, shopDomain: call.conn.shopDomain, orderId: String(ctx.params.orderId) };
    const holder = refundLeaseHolder(ctx);
    if (this.refundLeases) {
      // The room check is for a refund about to be sent for the first time: a retry or an "in progress" poll of this
      // call, which held the lease already, goes on within the budget (same key: it can only pick up the original).
      const held = ctx.scratch.get(LEASE_TAKEN) === true;
      const busy = await this.refundLeases.acquire(lease, holder, ctx.signal, held ? undefined : ctx.deadline);
      if (busy) {
        // Not taken as far as this call knows; but a take whose answer was lost may have committed, and that lease
        // would hold up every refund of the order until it expires. The release deletes only this call's own lease.
        // Not after an earlier attempt of this call took it: a refund may be at Shopify under it.
        if (!held) await this.refundLeases.release(lease, holder);
        return busy;
      }
      // The wait for the lease (another refund of the order at Shopify) may be long: a change answered 200/204
      // meanwhile is in force, as between attempts. Credentials the admin deleted or replaced are not sent the refund,
      // nor is it sent once the run ended or the org's kill switch was thrown (the refund went out seconds after
      // their 200, up to half the budget of waiting). Neither is the vendor refusing the credentials ("fix your
      // credentials" would be false), and a new call may get past it (deleted credentials: CREDENTIALS_NOT_FOUND):
      // nothing sent, the gateway's own failure.
      const standing = !held && ctx.sendStanding ? await ctx.sendStanding() : 'allowed';
      if (standing !== 'allowed') {
        await this.refundLeases.release(lease, holder);
        return notSentAfterWait(standing, 'shopify', 'this refund waited for the order', 'the refund');
      }
      ctx.scratch.set(LEASE_TAKEN, true);
    }
    // Shopify may still be running it (or the handler broke): the lease stays until it expires, so no other refund of the order overlaps it.
    // Sticky for the call: an earlier attempt that may still land (a 5xx, say) keeps the lease even when a later
    // attempt ends in a plain refusal (a 429, a 401), or the order's next refund could overlap it at Shopify.
    // A success ends it: Shopify answered the key with its refund, so no attempt of the call is still running there.
    // So does an answer that says the mutation was never sent (the order read failed, the refund was refused first).
    let keep = true;
    try {
      const outcome = await this.refundUnderLease(ctx, call, orderGid, amount);
      keep = !outcome.ok && (ctx.scratch.get(MAY_STILL_RUN) === true || mayStillRun(outcome));
      return outcome;
    } catch (err) {
      keep = ctx.scratch.get(MAY_STILL_RUN) === true || !(err instanceof TokenFetchError); // no token: the mutation never reached the Admin API
      throw err;
    } finally {
      if (keep) ctx.scratch.set(MAY_STILL_RUN, true);
      else if (this.refundLeases) {
        await this.refundLeases.release(lease, holder);
        // A retry (after a 429, say) takes the lease anew, room check included: nothing of this call is at Shopify,
        // and picks its payment afresh from what another refund of the order left meanwhile.
        ctx.scratch.delete(LEASE_TAKEN);
        forgetRefundParent(ctx);
      }
    }
  }

  /**
   * The order's payments, and the refund checked against the order (currency, amount): a failure when the read
   * failed or the refund cannot be made (nothing of the refund sent). An answered read marks the shop reached.
   */
  private async readRefundOrder(ctx: VendorCallContext, call: ShopifyCall, orderGid: string, amount: string): Promise<RefundOrder | FailedOutcome> {
    const context = await this.gql(call, REFUND_CONTEXT_QUERY, { id: orderGid });
    // Whatever happened to the read, the refund mutation itself was never sent; the read may have reached Shopify.
    if (!context.ok) return { ...context, requestSent: false, ...(context.requestSent ? { readSent: true as const } : {}) };
    ctx.scratch.set(SHOP_REACHED, true);
    const order = context.data.order;
    if (order === null || order === undefined) return failedOutcome('not_found', 'shopify order not found', context.vendorStatus, undefined, false);
    if (!isRecord(order)) return failedOutcome('bad_response', 'shopify order has an unexpected shape', context.vendorStatus, undefined, false);
    // The payments were refused to the app: "no payment to refund" would be a lie.
    if (context.denied) return failedOutcome('auth', 'shopify denied access to the order’s payments (ACCESS_DENIED: missing scope?)', context.vendorStatus, undefined, false);
    const currencyProblem = refundCurrencyProblem(order, ctx.params.currency);
    if (currencyProblem) return failedOutcome('rejected', currencyProblem, context.vendorStatus, undefined, false);
    const currency = refundCurrency(order);
    const amountProblem = refundAmountProblem(amount, currency);
    if (amountProblem) return failedOutcome('rejected', amountProblem, context.vendorStatus, undefined, false);
    return { ok: true, order, currency, vendorStatus: context.vendorStatus };
  }

  /** The order read (again, if it was read before the lease), the refund checked against it, and the mutation sent: with the order's refund lease held. */
  private async refundUnderLease(ctx: VendorCallContext, call: ShopifyCall, orderGid: string, amount: string): Promise<VendorOutcome> {
    const read = await this.readRefundOrder(ctx, call, orderGid, amount);
    if (!read.ok) return read;
    // The read is a round trip to Shopify: a change answered 200/204 meanwhile (credentials deleted or replaced, the
    // run ended, the kill switch thrown) is in force for a refund this call has not sent, as after the wait for the
    // lease (it went out up to a read's time after the 204). A retry of one that may be at Shopify goes on: under
    // the same key it can only pick up the original.
    if (ctx.sendStanding && ctx.scratch.get(MAY_STILL_RUN) !== true) {
      const standing = await ctx.sendStanding();
      if (standing !== 'allowed') return notSentAfterWait(standing, 'shopify', 'this refund read its order', 'the refund');
    }
    const { order, currency, vendorStatus } = read;
    const parent = refundParentOf(ctx, () => pickRefundParent(order, amount, currency));
    if (!parent) return failedOutcome('rejected', 'the order has no captured payment to refund', vendorStatus, undefined, false);

    // No local "still refundable" check: after an attempt that was applied but
    // unanswered it would refuse the retry that Shopify answers with the
    // original refund. Shopify enforces the ceiling itself (userErrors).
    const key = refundIdempotencyKey(ctx.orgId, ctx.idempotencyKey);
    const note = ctx.params.note;
    const input = buildRefundInput(orderGid, amount, typeof note === 'string' ? note : undefined, ctx.toolCallId, parent, currency);
    return this.sendRefund(ctx, call, key, input);
  }

  private async sendRefund(ctx: VendorCallContext, call: ShopifyCall, key: string, input: Record<string, unknown>): Promise<VendorOutcome> {
    const res = await this.gql(call, refundMutation(key), { input }, 'refundCreate');
    if (!res.ok) return res;
    return refundCreateOutcome(ctx, res);
  }
}

/**
 * A refund that failed with the mutation never sent, after an order read Shopify answered (in this attempt or an
 * earlier one of the call): a request of the call reached Shopify, so it is charged and counts as a vendor call
 * (readSent), while the write stays "never sent" (requestSent false: failed, not indeterminate).
 */
function withReadSent(ctx: VendorCallContext, outcome: VendorOutcome): VendorOutcome {
  if (outcome.ok || outcome.requestSent || outcome.readSent || ctx.scratch.get(SHOP_REACHED) !== true) return outcome;
  return { ...outcome, readSent: true };
}
