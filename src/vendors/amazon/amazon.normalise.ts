/**
 * SP-API Orders v0 payloads → the compact shapes the model sees. Only the
 * fields a support agent needs are kept (PII minimisation, VENDORS.md §5).
 * The gateway never asks for a Restricted Data Token, so the result carries
 * only what getOrder gives without one (VENDORS.md §2.2): the buyer's
 * anonymised email and the address's City/StateOrRegion/PostalCode/CountryCode.
 * Orders v2026-01-01 answers map to the same shapes (orders-v2026.normalise.ts).
 */

export interface Money {
  currency: string;
  amount: string;
}

export interface AmazonOrder {
  orderId: string;
  status: string | null;
  purchaseDate: string | null;
  fulfillmentChannel: string | null;
  orderTotal: Money | null;
  buyerEmail: string | null;
  shippingAddress: Record<string, unknown> | null;
}

export interface AmazonOrderItem {
  asin: string | null;
  sku: string | null;
  title: string | null;
  quantityOrdered: number | null;
  quantityShipped: number | null;
  itemPrice: Money | null;
}

export type JsonObject = Record<string, unknown>;

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function str(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

export function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

function money(v: unknown): Money | null {
  if (!isObject(v)) return null;
  const currency = str(v.CurrencyCode);
  const amount = str(v.Amount);
  return currency !== null && amount !== null ? { currency, amount } : null;
}

/**
 * The ShippingAddress parts getOrder returns without an RDT (VENDORS.md §2.2);
 * name, company, street lines, phone, AddressType and the rest are restricted
 * or need the restricted role. Kept by allowlist: a payload that does carry
 * more (an RDT-backed answer, a new field) still yields no more than this.
 */
export const UNRESTRICTED_ADDRESS_KEYS = ['City', 'StateOrRegion', 'PostalCode', 'CountryCode'] as const;

/** The unrestricted parts of a v0-shaped address, string values only. */
export function unrestrictedAddress(v: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const k of UNRESTRICTED_ADDRESS_KEYS) if (typeof v[k] === 'string') out[k] = v[k];
  return out;
}

export function normaliseOrder(orderId: string, payload: JsonObject): AmazonOrder {
  const buyer = isObject(payload.BuyerInfo) ? payload.BuyerInfo : {};
  return {
    orderId: str(payload.AmazonOrderId) ?? orderId,
    status: str(payload.OrderStatus),
    purchaseDate: str(payload.PurchaseDate),
    fulfillmentChannel: str(payload.FulfillmentChannel),
    orderTotal: money(payload.OrderTotal),
    // The anonymised @marketplace.amazon.com address; BuyerName/BuyerTaxInfo need an RDT and are not read.
    buyerEmail: str(buyer.BuyerEmail),
    shippingAddress: isObject(payload.ShippingAddress) ? unrestrictedAddress(payload.ShippingAddress) : null,
  };
}

export function normaliseOrderItem(raw: unknown): AmazonOrderItem {
  const item = isObject(raw) ? raw : {};
  return {
    asin: str(item.ASIN),
    sku: str(item.SellerSKU),
    title: str(item.Title),
    quantityOrdered: num(item.QuantityOrdered),
    quantityShipped: num(item.QuantityShipped),
    itemPrice: money(item.ItemPrice),
  };
}
