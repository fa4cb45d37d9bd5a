/**
 * SP-API Orders v2026-01-01 getOrder → the compact shapes Orders v0 gives
 * (amazon.normalise.ts), so the model sees the same result whichever version
 * AMAZON_ORDERS_API picks. Field names are those of the model
 * amzn/selling-partner-api-models models/orders-api-model/orders_2026-01-01.json
 * (definitions Order, OrderItem, ItemProduct, ItemFulfillment, ItemProceeds,
 * OrderFulfillment, OrderProceeds, Buyer, Recipient, CustomerAddress, Money);
 * values keep v0's spelling (`Shipped`, `Canceled`, `MFN`, PascalCase
 * address keys) so the answer does not change across the switch, and carry
 * no PII v0 would not give without a Restricted Data Token.
 */
import { isObject, num, str, type AmazonOrder, type AmazonOrderItem, type JsonObject, type Money } from './amazon.normalise.js';

/**
 * The getOrder `includedData` datasets each action needs, and no more: the
 * buyer and recipient (PII) only for get_order, whose result carries the
 * buyer email and the city/region/postcode/country of the address (v2026 has
 * no other source for those, so RECIPIENT stays; its restricted parts are
 * dropped on reading); items and products come without asking.
 */
export const INCLUDED_DATA = {
  // buyer.buyerEmail, recipient.deliveryAddress (unrestricted parts), proceeds.grandTotal, fulfillment.fulfillmentStatus / fulfilledBy
  get_order: ['BUYER', 'RECIPIENT', 'PROCEEDS', 'FULFILLMENT'],
  // orderItems[].proceeds.breakdowns (ITEM), orderItems[].fulfillment.quantityFulfilled
  get_order_items: ['PROCEEDS', 'FULFILLMENT'],
} as const;

/** FulfillmentStatus → v0 OrderStatus (v0's InvoiceUnconfirmed has no v2026 counterpart). */
const ORDER_STATUS = new Map([
  ['PENDING_AVAILABILITY', 'PendingAvailability'],
  ['PENDING', 'Pending'],
  ['UNSHIPPED', 'Unshipped'],
  ['PARTIALLY_SHIPPED', 'PartiallyShipped'],
  ['SHIPPED', 'Shipped'],
  ['CANCELLED', 'Canceled'], // v0 spells it with one L
  ['UNFULFILLABLE', 'Unfulfillable'],
]);

/** OrderFulfillment.fulfilledBy → v0 FulfillmentChannel. */
const FULFILLMENT_CHANNEL = new Map([
  ['MERCHANT', 'MFN'],
  ['AMAZON', 'AFN'],
]);

/**
 * CustomerAddress → v0 Address keys, only those v0 getOrder returns without
 * an RDT (UNRESTRICTED_ADDRESS_KEYS). v2026 hands name, companyName,
 * addressLine1-3, phone and extendedFields to any app with the PII role; the
 * gateway's v0 results never had them, so they are not copied (VENDORS.md §2.2, §5).
 */
const ADDRESS_KEYS = new Map<string, string>([
  ['city', 'City'],
  ['stateOrRegion', 'StateOrRegion'],
  ['postalCode', 'PostalCode'],
  ['countryCode', 'CountryCode'],
]);

function obj(v: unknown): JsonObject {
  return isObject(v) ? v : {};
}

/** The v0 spelling of an enum value; a value v0 never had is passed on as received rather than hidden. */
function v0Value(table: ReadonlyMap<string, string>, v: unknown): string | null {
  const s = str(v);
  return s === null ? null : (table.get(s) ?? s);
}

/** Money {amount, currencyCode} → {currency, amount} (Decimal stays a string: no float rounding). */
function money(v: unknown): Money | null {
  if (!isObject(v)) return null;
  const currency = str(v.currencyCode);
  const amount = str(v.amount);
  return currency !== null && amount !== null ? { currency, amount } : null;
}

/**
 * recipient.deliveryAddress in v0's no-RDT ShippingAddress form, string
 * values only, in v0's key order whatever order the answer uses.
 */
function shippingAddress(v: unknown): JsonObject | null {
  if (!isObject(v)) return null;
  const out: JsonObject = {};
  for (const [from, to] of ADDRESS_KEYS) if (typeof v[from] === 'string') out[to] = v[from];
  return out;
}

/** `order` of GetOrderResponse → AmazonOrder. */
export function normaliseOrderV2026(orderId: string, order: JsonObject): AmazonOrder {
  const fulfillment = obj(order.fulfillment);
  return {
    orderId: str(order.orderId) ?? orderId,
    status: v0Value(ORDER_STATUS, fulfillment.fulfillmentStatus),
    // "The time when the customer placed the order": v0 PurchaseDate.
    purchaseDate: str(order.createdTime),
    fulfillmentChannel: v0Value(FULFILLMENT_CHANNEL, fulfillment.fulfilledBy),
    orderTotal: money(obj(order.proceeds).grandTotal),
    buyerEmail: str(obj(order.buyer).buyerEmail),
    shippingAddress: shippingAddress(obj(order.recipient).deliveryAddress),
  };
}

/**
 * v0 ItemPrice is the selling price times the quantity, without shipping or
 * tax: the ITEM entry of ItemProceeds.breakdowns, not ItemPrice.unitPrice
 * (one unit). The model's own example: 3 × 29.99 → ITEM 89.97.
 */
function itemPrice(item: JsonObject): Money | null {
  const breakdowns = obj(item.proceeds).breakdowns;
  if (!Array.isArray(breakdowns)) return null;
  const line: unknown = breakdowns.find((b) => isObject(b) && b.type === 'ITEM');
  return isObject(line) ? money(line.subtotal) : null;
}

/** One entry of Order.orderItems → AmazonOrderItem. */
export function normaliseOrderItemV2026(raw: unknown): AmazonOrderItem {
  const item = obj(raw);
  const product = obj(item.product);
  return {
    asin: str(product.asin),
    sku: str(product.sellerSku),
    title: str(product.title),
    quantityOrdered: num(item.quantityOrdered),
    quantityShipped: num(obj(item.fulfillment).quantityFulfilled),
    itemPrice: itemPrice(item),
  };
}
