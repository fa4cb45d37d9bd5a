/**
 * SP-API Orders v2026-01-01 getOrder → the compact shapes Orders v0 gives
 * (amazon.normalise.ts), so the model sees the same result whichever version
 * AMAZON_ORDERS_API picks. Field names are those of the model
 * amzn/selling-partner-api-models models/orders-api-model/orders_2026-01-01.json
 * (definitions Order, OrderItem, ItemProduct, ItemFulfillment, ItemProceeds,
 * OrderFulfillment, OrderProceeds, Buyer, Recipient, CustomerAddress, Money);
 * values keep v0's spelling (`Shipped`, `Canceled`, `MFN`, `Residential`,
 * PascalCase address keys) so the answer does not change across the switch.
 */
import { isObject, num, str, type AmazonOrder, type AmazonOrderItem, type JsonObject, type Money } from './amazon.normalise.js';

/**
 * The getOrder `includedData` datasets each action needs, and no more: the
 * buyer and recipient (PII) only for get_order, whose result carries the
 * buyer email and the address; items and products come without asking.
 */
export const INCLUDED_DATA = {
  // buyer.buyerEmail, recipient.deliveryAddress, proceeds.grandTotal, fulfillment.fulfillmentStatus / fulfilledBy
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

/** CustomerAddress.addressType → v0 Address.AddressType; PICKUP_POINT has no v0 value and is passed as is. */
const ADDRESS_TYPE = new Map([
  ['RESIDENTIAL', 'Residential'],
  ['COMMERCIAL', 'Commercial'],
]);

/**
 * CustomerAddress → v0 Address keys. v2026 folds v0's County and District
 * into districtOrCounty; it comes back as County.
 */
const ADDRESS_KEYS = new Map([
  ['name', 'Name'],
  ['companyName', 'CompanyName'],
  ['addressLine1', 'AddressLine1'],
  ['addressLine2', 'AddressLine2'],
  ['addressLine3', 'AddressLine3'],
  ['city', 'City'],
  ['districtOrCounty', 'County'],
  ['stateOrRegion', 'StateOrRegion'],
  ['municipality', 'Municipality'],
  ['postalCode', 'PostalCode'],
  ['countryCode', 'CountryCode'],
  ['phone', 'Phone'],
]);

/** AddressExtendedFields (Brazil only) → v0 AddressExtendedFields. */
const EXTENDED_KEYS = new Map([
  ['streetName', 'StreetName'],
  ['streetNumber', 'StreetNumber'],
  ['complement', 'Complement'],
  ['neighborhood', 'Neighborhood'],
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

function renamed(v: JsonObject, keys: ReadonlyMap<string, string>): JsonObject {
  const out: JsonObject = {};
  for (const [k, value] of Object.entries(v)) {
    const to = keys.get(k);
    if (to !== undefined && typeof value === 'string') out[to] = value;
  }
  return out;
}

/** recipient.deliveryAddress in v0's ShippingAddress form; only the model's fields are kept. */
function shippingAddress(v: unknown): JsonObject | null {
  if (!isObject(v)) return null;
  const out = renamed(v, ADDRESS_KEYS);
  if (isObject(v.extendedFields)) out.ExtendedFields = renamed(v.extendedFields, EXTENDED_KEYS);
  const type = v0Value(ADDRESS_TYPE, v.addressType);
  if (type !== null) out.AddressType = type;
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
