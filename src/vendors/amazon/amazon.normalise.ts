/**
 * SP-API Orders v0 payloads → the compact shapes the model sees. Only the
 * fields a support agent needs are kept (PII minimisation, VENDORS.md §5);
 * the shipping address is passed on as received and redacted downstream.
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

export function normaliseOrder(orderId: string, payload: JsonObject): AmazonOrder {
  const buyer = isObject(payload.BuyerInfo) ? payload.BuyerInfo : {};
  return {
    orderId: str(payload.AmazonOrderId) ?? orderId,
    status: str(payload.OrderStatus),
    purchaseDate: str(payload.PurchaseDate),
    fulfillmentChannel: str(payload.FulfillmentChannel),
    orderTotal: money(payload.OrderTotal),
    buyerEmail: str(buyer.BuyerEmail),
    shippingAddress: isObject(payload.ShippingAddress) ? { ...payload.ShippingAddress } : null,
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
