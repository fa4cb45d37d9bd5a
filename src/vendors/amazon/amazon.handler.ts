/**
 * Amazon SP-API handler: `amazon_query.get_order` and `.get_order_items` on
 * Orders v0 (VENDORS.md §2) or, with AMAZON_ORDERS_API=2026-01-01, on Orders
 * v2026-01-01 getOrder, mapped to the same results. Failures come back as
 * outcomes; a TokenFetchError from LWA already carries the outcome to return.
 */
import { credentialsCheckOf, TokenCache, TokenFetchError } from '../auth/token-cache.js';
import { failedOutcome as fail, standingAfterTokenWait, type VendorCallContext, type VendorEndpoints, type VendorHandler, type VendorOutcome } from '../vendor-handler.js';
import { parseAmazonCredentials } from './amazon.credentials.js';
import { isObject, normaliseOrder, normaliseOrderItem, type AmazonOrderItem } from './amazon.normalise.js';
import { AMAZON_ORDER_ID, AMAZON_TOOLS } from './amazon.tools.js';
import { INCLUDED_DATA, normaliseOrderItemV2026, normaliseOrderV2026 } from './orders-v2026.normalise.js';
import { SpapiRates, SpapiSession } from './spapi.client.js';
import { hasLoneSurrogate } from '../../common/lone-surrogate.js';

/** getOrderItems pages are followed up to this bound; a longer list is returned as truncated (as is one whose NextToken repeats). */
export const MAX_ORDER_ITEM_PAGES = 10;


/**
 * How far one call's item listing got, kept across its attempts (ctx.scratch):
 * a retry after a 429 on page 4 asks for page 4, not pages 1-3 again, which
 * would only spend more of the 0.5 requests/s the operation has.
 */
interface ItemsProgress {
  items: AmazonOrderItem[];
  /** the page to ask for next; absent: page 1 */
  nextToken?: string;
  pages: number;
  /** every NextToken already asked for, so a resumed attempt still knows a repeat */
  requested: string[];
  /** set once a resumed NextToken was refused and the listing started over */
  restarted: boolean;
}
const ITEMS_PROGRESS = 'amazon.getOrderItems';

function isEmpty(o: Record<string, unknown>): boolean {
  return Object.keys(o).length === 0;
}

/**
 * An answer naming another order than the one asked for (v0 `AmazonOrderId`, v2026 `orderId`): a proxy or cache
 * mixing answers up, another customer's order, never handed back as this one's (as Shopify's answersAnother). An
 * answer that names none is taken as it is.
 */
function answersAnother(found: unknown, orderId: string): boolean {
  return typeof found === 'string' && found !== orderId;
}

export class AmazonHandler implements VendorHandler {
  readonly vendor = 'amazon' as const;
  readonly tools = AMAZON_TOOLS;

  constructor(
    private readonly endpoints: VendorEndpoints,
    private readonly tokens: TokenCache = new TokenCache(),
    private readonly rates: SpapiRates = new SpapiRates(),
  ) {}

  async execute(ctx: VendorCallContext): Promise<VendorOutcome> {
    const creds = parseAmazonCredentials(ctx.credentials);
    if ('invalidField' in creds) return fail('auth', `amazon credentials: ${creds.invalidField} is missing or invalid`);
    // The id goes into the URL path: re-check it even though the schema did.
    const orderId = ctx.params.orderId;
    if (typeof orderId !== 'string' || !AMAZON_ORDER_ID.test(orderId)) return fail('rejected', 'orderId: must be 3-7-7 digits');
    const session = new SpapiSession(this.endpoints, this.tokens, this.rates, creds, ctx.signal, `${ctx.orgId}:amazon`, credentialsCheckOf(ctx), ctx.tokensUsed, standingAfterTokenWait(ctx, 'amazon'));
    const v2026 = this.endpoints.amazonOrdersApi === '2026-01-01';
    try {
      switch (ctx.action) {
        case 'get_order':
          return await (v2026 ? this.fromOrderV2026(session, orderId, 'get_order') : this.getOrder(session, orderId));
        case 'get_order_items':
          return await (v2026 ? this.fromOrderV2026(session, orderId, 'get_order_items') : this.getOrderItems(session, orderId, ctx.scratch));
        default:
          return fail('rejected', 'amazon_query has no such action');
      }
    } catch (err) {
      if (err instanceof TokenFetchError) return err.outcome;
      throw err;
    }
  }

  private async getOrder(session: SpapiSession, orderId: string): Promise<VendorOutcome> {
    const res = await session.get('getOrder', `/orders/v0/orders/${orderId}`);
    if (!res.ok) return res.outcome;
    const payload = res.body.payload;
    // A well-formed unknown id has been seen to answer 200 {"payload":{}} (VENDORS.md §2.3);
    // an answer without any payload never gets here (SpapiSession).
    if (isObject(payload) && isEmpty(payload)) return fail('not_found', 'SP-API: order not found', res.status);
    if (!isObject(payload)) return fail('bad_response', 'SP-API answered with an unexpected payload', res.status);
    if (answersAnother(payload.AmazonOrderId, orderId)) return fail('bad_response', 'SP-API answered with another order than the one asked for', res.status);
    return { ok: true, data: normaliseOrder(orderId, payload), vendorStatus: res.status };
  }

  /**
   * Orders v2026-01-01: one getOrder answers both actions. Items always come
   * with the order and GetOrderResponse has no pagination, so there is no
   * separate items call and no NextToken loop; `includedData` asks only for
   * the datasets the action returns.
   */
  private async fromOrderV2026(session: SpapiSession, orderId: string, action: keyof typeof INCLUDED_DATA): Promise<VendorOutcome> {
    const res = await session.get('getOrder2026', `/orders/2026-01-01/orders/${orderId}?includedData=${INCLUDED_DATA[action].join(',')}`);
    if (!res.ok) return res.outcome;
    const order = res.body.order;
    // An unknown id answers 404 (the model); an empty order is read like v0's {"payload":{}} quirk.
    if (isObject(order) && isEmpty(order)) return fail('not_found', 'SP-API: order not found', res.status);
    if (!isObject(order)) return fail('bad_response', 'SP-API answered with an unexpected order', res.status);
    if (answersAnother(order.orderId, orderId)) return fail('bad_response', 'SP-API answered with another order than the one asked for', res.status);
    if (action === 'get_order') return { ok: true, data: normaliseOrderV2026(orderId, order), vendorStatus: res.status };
    if (!Array.isArray(order.orderItems)) return fail('bad_response', 'SP-API answered with an order without orderItems', res.status);
    return { ok: true, data: { orderId, items: order.orderItems.map(normaliseOrderItemV2026) }, vendorStatus: res.status };
  }

  private async getOrderItems(session: SpapiSession, orderId: string, scratch: Map<string, unknown>): Promise<VendorOutcome> {
    const saved = scratch.get(ITEMS_PROGRESS) as ItemsProgress | undefined;
    const items: AmazonOrderItem[] = saved ? [...saved.items] : [];
    let nextToken: string | undefined = saved?.nextToken;
    let pages = saved?.pages ?? 0;
    const requested = new Set(saved?.requested);
    let status: number;
    do {
      if (nextToken !== undefined) requested.add(nextToken);
      const query = nextToken ? `?NextToken=${encodeURIComponent(nextToken)}` : '';
      const res = await session.get('getOrderItems', `/orders/v0/orders/${orderId}/orderItems${query}`);
      if (!res.ok) {
        if (saved && pages === saved.pages && res.outcome.kind === 'rejected' && !saved.restarted) {
          // The saved NextToken was refused (too old?): start over from page 1, once.
          scratch.set(ITEMS_PROGRESS, { items: [], pages: 0, requested: [], restarted: true } satisfies ItemsProgress);
          return this.getOrderItems(session, orderId, scratch);
        }
        return res.outcome;
      }
      status = res.status;
      const payload = res.body.payload;
      if (pages === 0 && isObject(payload) && isEmpty(payload)) {
        return fail('not_found', 'SP-API: order not found', status);
      }
      if (!isObject(payload) || !Array.isArray(payload.OrderItems)) {
        return fail('bad_response', 'SP-API answered with an unexpected order items payload', status);
      }
      // Every page names the order it lists (OrderItemsList.AmazonOrderId).
      if (answersAnother(payload.AmazonOrderId, orderId)) return fail('bad_response', 'SP-API answered with the items of another order than the one asked for', status);
      nextToken = typeof payload.NextToken === 'string' && payload.NextToken !== '' ? payload.NextToken : undefined;
      if (nextToken !== undefined && hasLoneSurrogate(nextToken)) {
        // No URL can carry it, so the listing cannot go on.
        return fail('bad_response', 'SP-API answered a NextToken that is not well-formed text', status);
      }
      if (nextToken !== undefined && requested.has(nextToken)) {
        // The listing loops (seen live: the same NextToken answered again). The page that
        // says so is not known to be new - the loop serves the same page - so it is not
        // added; the items so far are the answer, truncated like a listing over the page bound.
        break;
      }
      pages += 1;
      items.push(...payload.OrderItems.map(normaliseOrderItem));
      if (nextToken !== undefined) {
        scratch.set(ITEMS_PROGRESS, { items: [...items], nextToken, pages, requested: [...requested], restarted: saved?.restarted ?? false } satisfies ItemsProgress);
      }
    } while (nextToken !== undefined && pages < MAX_ORDER_ITEM_PAGES);
    scratch.delete(ITEMS_PROGRESS);
    const data = nextToken === undefined ? { orderId, items } : { orderId, items, truncated: true };
    return { ok: true, data, vendorStatus: status };
  }
}
