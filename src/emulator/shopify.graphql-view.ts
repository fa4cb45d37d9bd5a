/**
 * GraphQL Admin shapes of the emulator's fixtures (VENDORS.md §1.3). The
 * emulator does not parse selection sets, so a view always carries every field
 * the gateway may select; clients must ignore what they did not ask for. Lists
 * are the exception, as their size is what a client must see: each honours the
 * `first:` (and a connection `after:`) the document gives it, and a connection
 * answers `pageInfo` when its selection names it (ListArgs).
 */
import { SHOP_CURRENCY, type EmuOrder, type EmuProduct, type EmuRefund, type EmuTransaction } from './shopify.fixtures.js';

export function gid(type: string, id: number): string {
  return `gid://shopify/${type}/${id}`;
}

/** How the document asks for one list field. */
export interface ListArgs {
  /** `first:`, a literal or a variable; absent: the whole list (real Shopify refuses a connection without first/last) */
  first?: number;
  /** a connection's `after:` cursor, a literal or a variable */
  after?: string;
  /** the connection's own selection names pageInfo */
  pageInfo: boolean;
}

/** How the document asks for each list field, by name; a field it does not name reads as the whole list. */
export type ListShape = (field: string) => ListArgs | undefined;

const WHOLE: ListShape = () => undefined;

/** An argument as the document writes it: a literal, or the name of a variable. */
type RawArg = { literal: unknown } | { variable: string } | undefined;

function rawArg(args: string, name: string): RawArg {
  const m = new RegExp(`\\b${name}\\s*:\\s*(?:(\\d+)|"([^"]*)"|\\$(\\w+))`).exec(args);
  if (!m) return undefined;
  return m[1] !== undefined ? { literal: Number(m[1]) } : m[2] !== undefined ? { literal: m[2] } : { variable: m[3] };
}

const valueOf = (arg: RawArg, variables: Record<string, unknown>): unknown =>
  arg === undefined ? undefined : 'literal' in arg ? arg.literal : variables[arg.variable];

/** How a document asks for one field, before its variables are known. */
interface RawListArgs {
  first: RawArg;
  after: RawArg;
  pageInfo: boolean;
}

/**
 * The arguments of the first `field(...)` in the document, and whether its selection set (its own level, not the
 * fields nested in it) names pageInfo. Enough for the documents clients send: no GraphQL parser.
 */
function rawListArgs(query: string, field: string): RawListArgs | undefined {
  const m = new RegExp(`\\b${field}\\s*\\(([^)]*)\\)`).exec(query);
  if (!m) return undefined;
  let pageInfo = false;
  let at = m.index + m[0].length;
  while (at < query.length && /\s/.test(query[at])) at++;
  if (query[at] === '{') {
    let depth = 0;
    let own = '';
    for (; at < query.length; at++) {
      const c = query[at];
      if (c === '{') depth++;
      else if (c === '}' && --depth === 0) break;
      else if (depth === 1) own += c;
    }
    pageInfo = /\bpageInfo\b/.test(own);
  }
  return { first: rawArg(m[1], 'first'), after: rawArg(m[1], 'after'), pageInfo };
}

/**
 * Documents already read, by text: a client sends the same few documents again and again, and reading one costs more
 * than the emulator's answer (the bench's floor is this emulator). Bounded: a client sending ever-new documents
 * starts the cache over.
 */
const READ_DOCUMENTS = new Map<string, Map<string, RawListArgs | undefined>>();
const READ_DOCUMENTS_MAX = 256;

/** How the document asks for each list field (ListShape), its variables given. */
export function listShapeOf(query: string, variables: Record<string, unknown>): ListShape {
  let fields = READ_DOCUMENTS.get(query);
  if (!fields) {
    if (READ_DOCUMENTS.size >= READ_DOCUMENTS_MAX) READ_DOCUMENTS.clear();
    fields = new Map();
    READ_DOCUMENTS.set(query, fields);
  }
  const known = fields;
  return (field) => {
    if (!known.has(field)) known.set(field, rawListArgs(query, field));
    const raw = known.get(field);
    if (!raw) return undefined;
    const first = valueOf(raw.first, variables);
    const after = valueOf(raw.after, variables);
    return {
      ...(typeof first === 'number' && Number.isInteger(first) && first >= 0 ? { first } : {}),
      ...(typeof after === 'string' ? { after } : {}),
      pageInfo: raw.pageInfo,
    };
  };
}

/** An opaque cursor: the position after the entry it names. */
function cursorAt(position: number): string {
  return Buffer.from(JSON.stringify({ position }), 'utf8').toString('base64url');
}

function positionOf(cursor: string | undefined): number {
  if (cursor === undefined) return 0;
  try {
    const { position } = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { position?: unknown };
    return typeof position === 'number' && Number.isInteger(position) && position >= 0 ? position : 0;
  } catch {
    return 0;
  }
}

/** A plain list (Order.fulfillments, Fulfillment.trackingInfo, Order.transactions): at most `first` entries. */
function plainList<T, V>(items: readonly T[], args: ListArgs | undefined, view: (item: T) => V): V[] {
  return items.slice(0, args?.first ?? items.length).map(view);
}

/** A connection: `{nodes}` of at most `first` entries after `after`, with pageInfo when asked. */
function connection<T, V>(items: readonly T[], args: ListArgs | undefined, view: (item: T) => V): Record<string, unknown> {
  const start = Math.min(positionOf(args?.after), items.length);
  const end = args?.first === undefined ? items.length : Math.min(items.length, start + args.first);
  const out: Record<string, unknown> = { nodes: items.slice(start, end).map(view) };
  if (args?.pageInfo) {
    const empty = end === start;
    out.pageInfo = {
      hasNextPage: end < items.length,
      hasPreviousPage: start > 0,
      startCursor: empty ? null : cursorAt(start + 1),
      endCursor: empty ? null : cursorAt(end),
    };
  }
  return out;
}

// ISO 4217 minor units of the currencies that do not have 2, as Shopify keeps money in them. The emulator's own
// table, not the gateway's: it plays Shopify, so it must not agree with the gateway by construction.
const NO_DECIMALS = new Set(['BIF', 'CLP', 'DJF', 'GNF', 'ISK', 'JPY', 'KMF', 'KRW', 'PYG', 'RWF', 'UGX', 'VND', 'VUV', 'XAF', 'XOF', 'XPF']);
const THREE_DECIMALS = new Set(['BHD', 'IQD', 'JOD', 'KWD', 'LYD', 'OMR', 'TND']);

export function currencyDecimals(currency: string): number {
  return NO_DECIMALS.has(currency) ? 0 : THREE_DECIMALS.has(currency) ? 3 : 2;
}

/** An amount in minor units of the currency (cents, fils, yen) as a decimal string: 12345 KWD → "12.345". */
export function formatMinor(minor: number, currency: string): string {
  const decimals = currencyDecimals(currency);
  if (decimals === 0) return String(minor);
  const unit = 10 ** decimals;
  return `${Math.trunc(minor / unit)}.${String(minor % unit).padStart(decimals, '0')}`;
}

interface MoneyBag {
  shopMoney: { amount: string; currencyCode: string };
  presentmentMoney: { amount: string; currencyCode: string };
}

/** A MoneyBag of an amount in minor units of the order's presentment currency. */
function money(minor: number, order: EmuOrder): MoneyBag {
  const shopMinorPerPresentmentMinor = order.shopPerPresentment * 10 ** (currencyDecimals(order.currencyCode) - currencyDecimals(order.presentmentCurrencyCode));
  return {
    shopMoney: { amount: formatMinor(Math.round(minor * shopMinorPerPresentmentMinor), order.currencyCode), currencyCode: order.currencyCode },
    presentmentMoney: { amount: formatMinor(minor, order.presentmentCurrencyCode), currencyCode: order.presentmentCurrencyCode },
  };
}

/** What is still refundable on a SALE/CAPTURE, in minor units: its amount minus the refunds booked against it. */
export function refundableMinor(order: EmuOrder, tx: EmuTransaction): number {
  if (tx.kind !== 'SALE' && tx.kind !== 'CAPTURE') return 0;
  if (tx.status !== 'SUCCESS') return 0;
  let refunded = 0;
  // A refund transaction that did not fail (pending, unknown, ...) may yet move the money: it holds its amount.
  for (const t of order.transactions) if (t.kind === 'REFUND' && t.parentId === tx.id && t.status !== 'FAILURE') refunded += t.amountCents;
  return Math.max(0, tx.amountCents - refunded);
}

export function transactionView(order: EmuOrder, tx: EmuTransaction): Record<string, unknown> {
  return {
    id: gid('OrderTransaction', tx.id),
    kind: tx.kind,
    status: tx.status,
    gateway: tx.gateway,
    amountSet: money(tx.amountCents, order),
    maximumRefundableV2: { amount: formatMinor(refundableMinor(order, tx), order.presentmentCurrencyCode), currencyCode: order.presentmentCurrencyCode },
    parentTransaction: tx.parentId === undefined ? null : { id: gid('OrderTransaction', tx.parentId) },
  };
}

export function refundView(order: EmuOrder, refund: EmuRefund): Record<string, unknown> {
  const txs = order.transactions.filter((t) => refund.transactionIds.includes(t.id));
  return {
    id: gid('Refund', refund.id),
    note: refund.note,
    createdAt: refund.createdAt,
    totalRefundedSet: money(refund.amountCents, order),
    transactions: { nodes: txs.map((t) => transactionView(order, t)) },
  };
}

export function orderView(o: EmuOrder, lists: ListShape = WHOLE): Record<string, unknown> {
  return {
    id: gid('Order', o.id),
    legacyResourceId: String(o.id),
    name: o.name,
    createdAt: o.createdAt,
    email: o.email,
    phone: o.phone,
    note: o.note,
    displayFinancialStatus: o.displayFinancialStatus,
    displayFulfillmentStatus: o.displayFulfillmentStatus,
    currencyCode: o.currencyCode,
    presentmentCurrencyCode: o.presentmentCurrencyCode,
    totalPriceSet: money(o.totalCents, o),
    totalRefundedSet: money(o.refunds.reduce((sum, r) => sum + r.amountCents, 0), o),
    customer: o.customer && {
      firstName: o.customer.firstName,
      lastName: o.customer.lastName,
      defaultEmailAddress: o.customer.email === null ? null : { emailAddress: o.customer.email },
      defaultPhoneNumber: o.customer.phone === null ? null : { phoneNumber: o.customer.phone },
    },
    shippingAddress: o.shippingAddress && { ...o.shippingAddress },
    lineItems: connection(o.lineItems, lists('lineItems'), (li) => ({
      id: gid('LineItem', li.id),
      name: li.name,
      title: li.title,
      sku: li.sku,
      quantity: li.quantity,
      originalUnitPriceSet: money(li.priceCents, o),
    })),
    // Order.fulfillments, Fulfillment.trackingInfo and Order.transactions are plain lists in the Admin API, not
    // connections: `first:` sizes them, and nothing says whether more remain.
    fulfillments: plainList(o.fulfillments, lists('fulfillments'), (f) => ({
      status: f.status,
      trackingInfo: plainList(f.tracking, lists('trackingInfo'), (t) => ({ number: t.number, company: t.company, url: t.url })),
    })),
    transactions: plainList(o.transactions, lists('transactions'), (t) => transactionView(o, t)),
    refunds: o.refunds.map((r) => refundView(o, r)),
  };
}

export function productView(p: EmuProduct, lists: ListShape = WHOLE): Record<string, unknown> {
  return {
    id: gid('Product', p.id),
    legacyResourceId: String(p.id),
    title: p.title,
    handle: p.handle,
    status: p.status,
    vendor: p.vendor,
    productType: p.productType,
    totalInventory: p.totalInventory,
    variants: connection(p.variants, lists('variants'), (v) => ({
      id: gid('ProductVariant', v.id),
      title: v.title,
      sku: v.sku,
      price: formatMinor(v.priceCents, SHOP_CURRENCY),
      inventoryQuantity: v.inventoryQuantity,
    })),
  };
}
