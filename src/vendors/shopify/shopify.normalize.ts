/**
 * Shopify GraphQL payloads → the gateway's stable result shapes. Defensive on
 * purpose: a field Shopify leaves out (protected customer data comes back null
 * for apps without approval, VENDORS.md §1.1) becomes null, never a crash.
 */
import { isRecord } from './shopify.client.js';
import { ORDER_LIST_FIRST, PRODUCT_VARIANTS_FIRST } from './shopify.graphql.js';

function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

function lower(v: unknown): string | null {
  return typeof v === 'string' ? v.toLowerCase() : null;
}

/** Accepts a plain list or a connection's `{nodes: [...]}`. */
function list(v: unknown): Record<string, unknown>[] {
  const items = Array.isArray(v) ? v : isRecord(v) && Array.isArray(v.nodes) ? v.nodes : [];
  return items.filter(isRecord);
}

/**
 * Whether Shopify has more of a list than the `first` entries kept (the query asks once, never pages on): a
 * connection says so in `pageInfo.hasNextPage` (answered without it: by coming back full); a plain list is asked for
 * one entry more than is kept (ORDER_QUERY), so more than `first` coming back says it.
 */
function mayBeCut(v: unknown, first: number): boolean {
  if (Array.isArray(v)) return v.length > first;
  if (isRecord(v) && isRecord(v.pageInfo) && typeof v.pageInfo.hasNextPage === 'boolean') return v.pageInfo.hasNextPage;
  return isRecord(v) && Array.isArray(v.nodes) && v.nodes.length >= first;
}

/** "gid://shopify/Refund/123" → "123"; other text passes through. */
export function legacyId(gid: unknown): string | null {
  if (typeof gid !== 'string') return null;
  const slash = gid.lastIndexOf('/');
  return slash === -1 ? gid : gid.slice(slash + 1);
}

/** A MoneyBag's amount in the currency the customer paid in (`presentmentMoney.amount`), or null. */
function presentmentAmount(bag: unknown): string | null {
  return isRecord(bag) && isRecord(bag.presentmentMoney) ? str(bag.presentmentMoney.amount) : null;
}

export interface NormalizedOrder {
  orderId: string;
  name: string | null;
  status: string | null;
  financialStatus: string | null;
  /** the currency the customer paid in (what a refund of the order is given in) */
  currency: string | null;
  /** the order's total and what was refunded of it so far, in `currency` (decimal text as Shopify gives it) */
  totalPrice: string | null;
  totalRefunded: string | null;
  /** the merchant's note on the order: shopify_order.add_note replaces it */
  note: string | null;
  /** first tracking number, for the common single-parcel case (API.md §4 example) */
  trackingNumber: string | null;
  trackingNumbers: string[];
  /** each parcel's tracking: its number, carrier and tracking page, as Shopify has them */
  tracking: Array<{ number: string; company: string | null; url: string | null }>;
  /** unitPrice: one unit's price before discounts, in `currency` */
  items: Array<{ name: string | null; quantity: number; unitPrice: string | null }>;
  customer: { email: string | null; phone: string | null };
  shippingAddress: Record<string, string | null> | null;
  /**
   * Present (true) when a list is cut: Shopify has more line items than `items` holds, or more fulfillments or
   * tracking numbers than were read (ORDER_LIST_FIRST). As `truncated` of amazon_query.get_order_items.
   */
  truncated?: true;
}

export function normalizeOrder(orderId: string, o: Record<string, unknown>): NormalizedOrder {
  // One fulfillment per parcel, each with its tracking (VENDORS.md §1.3). A Set: the answer's lists are the vendor's
  // to size (within VENDOR_MAX_RESPONSE_BYTES), and an array's includes() made 100,000 of them a 7 s stall.
  const seen = new Map<string, { number: string; company: string | null; url: string | null }>();
  let truncated = mayBeCut(o.lineItems, ORDER_LIST_FIRST.lineItems) || mayBeCut(o.fulfillments, ORDER_LIST_FIRST.fulfillments);
  for (const f of list(o.fulfillments).slice(0, ORDER_LIST_FIRST.fulfillments)) {
    if (mayBeCut(f.trackingInfo, ORDER_LIST_FIRST.trackingInfo)) truncated = true;
    for (const t of list(f.trackingInfo).slice(0, ORDER_LIST_FIRST.trackingInfo)) {
      const n = str(t.number);
      if (n && !seen.has(n)) seen.set(n, { number: n, company: str(t.company), url: str(t.url) });
    }
  }
  const trackingNumbers = [...seen.keys()];
  const customer = isRecord(o.customer) ? o.customer : {};
  const email = isRecord(customer.defaultEmailAddress) ? str(customer.defaultEmailAddress.emailAddress) : null;
  const phone = isRecord(customer.defaultPhoneNumber) ? str(customer.defaultPhoneNumber.phoneNumber) : null;
  const a = isRecord(o.shippingAddress) ? o.shippingAddress : null;
  const order: NormalizedOrder = {
    orderId,
    name: str(o.name),
    status: lower(o.displayFulfillmentStatus),
    financialStatus: lower(o.displayFinancialStatus),
    currency: str(o.presentmentCurrencyCode),
    totalPrice: presentmentAmount(o.totalPriceSet),
    totalRefunded: presentmentAmount(o.totalRefundedSet),
    note: str(o.note),
    trackingNumber: trackingNumbers[0] ?? null,
    trackingNumbers,
    tracking: [...seen.values()],
    items: list(o.lineItems).map((li) => ({
      name: str(li.name),
      quantity: typeof li.quantity === 'number' ? li.quantity : 0,
      unitPrice: presentmentAmount(li.originalUnitPriceSet),
    })),
    customer: { email: email ?? str(o.email), phone: phone ?? str(o.phone) },
    shippingAddress: a && {
      name: str(a.name),
      address1: str(a.address1),
      address2: str(a.address2),
      city: str(a.city),
      province: str(a.province),
      provinceCode: str(a.provinceCode),
      zip: str(a.zip),
      country: str(a.country),
      countryCode: str(a.countryCodeV2),
      phone: str(a.phone),
    },
  };
  if (truncated) order.truncated = true;
  return order;
}

/** `truncated: true` after `variants` when the product has more variants than were read (PRODUCT_VARIANTS_FIRST). */
export function normalizeProduct(productId: string, p: Record<string, unknown>): Record<string, unknown> {
  const product: Record<string, unknown> = {
    productId,
    title: str(p.title),
    handle: str(p.handle),
    status: lower(p.status),
    vendor: str(p.vendor),
    productType: str(p.productType),
    totalInventory: typeof p.totalInventory === 'number' ? p.totalInventory : null,
    variants: list(p.variants).map((v) => ({
      variantId: legacyId(v.id),
      title: str(v.title),
      sku: str(v.sku),
      price: str(v.price),
      inventoryQuantity: typeof v.inventoryQuantity === 'number' ? v.inventoryQuantity : null,
    })),
  };
  if (mayBeCut(p.variants, PRODUCT_VARIANTS_FIRST)) product.truncated = true;
  return product;
}

function money(set: unknown): { amount: string | null; currency: string | null } {
  const shop = isRecord(set) && isRecord(set.shopMoney) ? set.shopMoney : {};
  return { amount: str(shop.amount), currency: str(shop.currencyCode) };
}

function presentmentMoney(set: unknown): { amount: string | null; currency: string | null } {
  const bag = isRecord(set) && isRecord(set.presentmentMoney) ? set.presentmentMoney : undefined;
  return bag ? { amount: str(bag.amount), currency: str(bag.currencyCode) } : money(set);
}

/**
 * `error`: a payment transaction whose status does not say whether the money moved — ERROR, UNKNOWN, or a status
 * not known here (never handed out as a result).
 */
export type RefundSettlement = 'success' | 'pending' | 'failed' | 'error';

/**
 * What each OrderTransactionStatus value VENDORS.md §1.8 lists says of a refund transaction's money. UNKNOWN ("the
 * transaction status is unknown") is left out on purpose, as is anything else: see transactionSettlement. REST's
 * lower-case spellings are not read here: the gateway reads refunds through GraphQL only.
 */
const SETTLEMENT_OF_STATUS: ReadonlyMap<string, RefundSettlement> = new Map<string, RefundSettlement>([
  ['SUCCESS', 'success'],
  ['PENDING', 'pending'],
  ['AWAITING_RESPONSE', 'pending'],
  ['FAILURE', 'failed'],
  ['ERROR', 'error'],
]);

/**
 * One refund transaction's status, read. Any value not in SETTLEMENT_OF_STATUS — UNKNOWN, a status Shopify adds
 * later, another spelling, none at all — says nothing of whether the money moved: `error` (the write's outcome is
 * unknown), so that no status the gateway cannot read is ever reported as a success, nor as a failure to redo.
 */
export function transactionSettlement(status: unknown): RefundSettlement {
  return (typeof status === 'string' ? SETTLEMENT_OF_STATUS.get(status) : undefined) ?? 'error';
}

const STATUS_LABEL = /^[A-Z][A-Z0-9_]{0,39}$/;

/**
 * The status of the refund's first transaction that leaves whether the money moved unknown, for the call's error text:
 * Shopify's word when it looks like an enum value, never arbitrary vendor text. Undefined when there is none.
 */
export function unknownOutcomeStatus(r: Record<string, unknown>): string | undefined {
  const t = list(r.transactions).find((tx) => transactionSettlement(tx.status) === 'error');
  if (!t) return undefined;
  if (typeof t.status !== 'string' || t.status === '') return 'no status';
  return STATUS_LABEL.test(t.status) ? t.status : 'an unrecognised status';
}

export interface NormalizedRefund {
  refundId: string | null;
  orderId: string;
  amount: string | null;
  currency: string | null;
  /** a Refund record is not proof money moved: this reflects its transactions (VENDORS.md §1.8) */
  status: RefundSettlement;
  createdAt: string | null;
}

/**
 * `success` only when the refund's payment transactions that did not fail are
 * all SUCCESS (VENDORS.md §1.8, §1.9 point 7). A refund record without any
 * transaction proves nothing moved: Shopify accepted it, nothing more —
 * `pending`, like a transaction still PENDING or AWAITING_RESPONSE. `failed`
 * only when every transaction is FAILURE: a declined attempt beside one that
 * went through (or is still pending) is a refund whose money moved (or may),
 * and calling it failed would invite a new call, a second refund. ERROR is
 * documented as "an error while processing the transaction", not as money
 * that did not move, and UNKNOWN (or any status not known here, see
 * transactionSettlement) says even less, so they are `error` (first: one
 * leaves the whole refund unknown) — a definite failure would invite a second
 * refund; a success or pending would report money that may never move.
 */
export function normalizeRefund(orderId: string, r: Record<string, unknown>): NormalizedRefund {
  const settlements = list(r.transactions).map((t) => transactionSettlement(t.status));
  // What the transactions that did not fail say; a declined attempt says nothing of one that went through.
  const others = settlements.filter((s) => s !== 'failed');
  let status: RefundSettlement = 'success';
  if (others.includes('error')) status = 'error';
  else if (settlements.length > 0 && others.length === 0) status = 'failed';
  else if (others.length === 0 || others.includes('pending')) status = 'pending';
  // In the currency the refund was asked in: the presentment one (the shop's
  // for most orders, where both are the same).
  const total = presentmentMoney(r.totalRefundedSet);
  return { refundId: legacyId(r.id), orderId, amount: total.amount, currency: total.currency, status, createdAt: str(r.createdAt) };
}
