/**
 * GraphQL Admin shapes of the emulator's fixtures (VENDORS.md §1.3). The
 * emulator does not parse selection sets, so a view always carries every field
 * the gateway may select; clients must ignore what they did not ask for.
 */
import { SHOP_CURRENCY, type EmuOrder, type EmuProduct, type EmuRefund, type EmuTransaction } from './shopify.fixtures.js';

export function gid(type: string, id: number): string {
  return `gid://shopify/${type}/${id}`;
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
  for (const t of order.transactions) if (t.kind === 'REFUND' && t.parentId === tx.id && t.status === 'SUCCESS') refunded += t.amountCents;
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

export function orderView(o: EmuOrder): Record<string, unknown> {
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
    customer: o.customer && {
      firstName: o.customer.firstName,
      lastName: o.customer.lastName,
      defaultEmailAddress: o.customer.email === null ? null : { emailAddress: o.customer.email },
      defaultPhoneNumber: o.customer.phone === null ? null : { phoneNumber: o.customer.phone },
    },
    shippingAddress: o.shippingAddress && { ...o.shippingAddress },
    lineItems: {
      nodes: o.lineItems.map((li) => ({
        id: gid('LineItem', li.id),
        name: li.name,
        title: li.title,
        sku: li.sku,
        quantity: li.quantity,
        originalUnitPriceSet: money(li.priceCents, o),
      })),
    },
    // Order.fulfillments and trackingInfo are plain lists in the Admin API, not connections.
    fulfillments: o.fulfillments.map((f) => ({
      status: f.status,
      trackingInfo: f.tracking.map((t) => ({ number: t.number, company: t.company, url: t.url })),
    })),
    transactions: o.transactions.map((t) => transactionView(o, t)),
    refunds: o.refunds.map((r) => refundView(o, r)),
  };
}

export function productView(p: EmuProduct): Record<string, unknown> {
  return {
    id: gid('Product', p.id),
    legacyResourceId: String(p.id),
    title: p.title,
    handle: p.handle,
    status: p.status,
    vendor: p.vendor,
    productType: p.productType,
    totalInventory: p.totalInventory,
    variants: {
      nodes: p.variants.map((v) => ({
        id: gid('ProductVariant', v.id),
        title: v.title,
        sku: v.sku,
        price: formatMinor(v.priceCents, SHOP_CURRENCY),
        inventoryQuantity: v.inventoryQuantity,
      })),
    },
  };
}
