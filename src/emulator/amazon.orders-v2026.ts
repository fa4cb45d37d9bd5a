/**
 * The emulator's Orders v2026-01-01 view of the seeded v0 fixtures: the same
 * order reads the same through both versions. Shapes follow the model
 * amzn/selling-partner-api-models models/orders-api-model/orders_2026-01-01.json
 * (GetOrderResponse {order}; Order requires orderId, createdTime,
 * lastUpdatedTime, salesChannel, orderItems; OrderItem requires orderItemId,
 * quantityOrdered, product). Datasets appear only when `includedData` asks.
 */

/** The includedData enum of getOrder. */
export const ORDERS_V2026_DATASETS = [
  'BUYER', 'RECIPIENT', 'PROCEEDS', 'EXPENSE', 'PROMOTION', 'CANCELLATION', 'FULFILLMENT', 'PACKAGES', 'TAX', 'PAYMENT', 'FULFILLMENT_ORDERS',
] as const;
export type OrdersV2026Dataset = (typeof ORDERS_V2026_DATASETS)[number];

type Obj = Record<string, unknown>;

/** v0 OrderStatus → FulfillmentStatus. */
const FULFILLMENT_STATUS: Record<string, string> = {
  PendingAvailability: 'PENDING_AVAILABILITY',
  Pending: 'PENDING',
  Unshipped: 'UNSHIPPED',
  PartiallyShipped: 'PARTIALLY_SHIPPED',
  Shipped: 'SHIPPED',
  Canceled: 'CANCELLED',
  Unfulfillable: 'UNFULFILLABLE',
};
const FULFILLED_BY: Record<string, string> = { MFN: 'MERCHANT', AFN: 'AMAZON' };
const ADDRESS_TYPE: Record<string, string> = { Residential: 'RESIDENTIAL', Commercial: 'COMMERCIAL' };
/** v0 Address → CustomerAddress, in v0's key order. */
const ADDRESS_KEYS: [string, string][] = [
  ['Name', 'name'], ['CompanyName', 'companyName'], ['AddressLine1', 'addressLine1'], ['AddressLine2', 'addressLine2'], ['AddressLine3', 'addressLine3'],
  ['City', 'city'], ['County', 'districtOrCounty'], ['StateOrRegion', 'stateOrRegion'], ['Municipality', 'municipality'],
  ['PostalCode', 'postalCode'], ['CountryCode', 'countryCode'], ['Phone', 'phone'],
];

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** v0 Money {CurrencyCode, Amount} → Money {amount, currencyCode}. */
function money(v: unknown): Obj | undefined {
  return isObj(v) ? { amount: v.Amount, currencyCode: v.CurrencyCode } : undefined;
}

const cents = (amount: unknown): number => Math.round(Number(amount) * 100);
const amountOf = (c: number): string => (c / 100).toFixed(2);

function address(v0: Obj): Obj {
  const out: Obj = {};
  for (const [from, to] of ADDRESS_KEYS) if (typeof v0[from] === 'string') out[to] = v0[from];
  if (typeof v0.AddressType === 'string') out.addressType = ADDRESS_TYPE[v0.AddressType] ?? v0.AddressType;
  return out;
}

function orderItem(v0: Obj, want: ReadonlySet<OrdersV2026Dataset>): Obj {
  const qty = typeof v0.QuantityOrdered === 'number' ? v0.QuantityOrdered : 0;
  const price = isObj(v0.ItemPrice) ? v0.ItemPrice : undefined;
  const product: Obj = { asin: v0.ASIN, title: v0.Title, sellerSku: v0.SellerSKU };
  // v0 ItemPrice is price × quantity; v2026 names the price of one unit.
  if (price && qty > 0) product.price = { unitPrice: { amount: amountOf(cents(price.Amount) / qty), currencyCode: price.CurrencyCode } };
  const item: Obj = { orderItemId: v0.OrderItemId, quantityOrdered: qty, product };
  if (want.has('PROCEEDS') && price) {
    const tax = isObj(v0.ItemTax) ? v0.ItemTax : undefined;
    const breakdowns: Obj[] = [{ type: 'ITEM', subtotal: money(price) }];
    if (tax) breakdowns.push({ type: 'TAX', subtotal: money(tax) });
    item.proceeds = {
      proceedsTotal: { amount: amountOf(cents(price.Amount) + (tax ? cents(tax.Amount) : 0)), currencyCode: price.CurrencyCode },
      breakdowns,
    };
  }
  if (want.has('FULFILLMENT')) {
    const shipped = typeof v0.QuantityShipped === 'number' ? v0.QuantityShipped : 0;
    item.fulfillment = { quantityFulfilled: shipped, quantityUnfulfilled: qty - shipped };
  }
  return item;
}

/**
 * Amazon gives v2026's `buyer.buyerEmail` only for an order "fulfilled by the merchant" and "in UNSHIPPED,
 * PARTIALLY_SHIPPED, or SHIPPED status" (developer-docs.amazon.com/sp-api/docs/access-orders-pii, "Get buyer's
 * email for orders"): never for an Amazon-fulfilled one, a pending or a cancelled one, whatever `includedData` asks.
 */
function emailGiven(order: Obj): boolean {
  return order.FulfillmentChannel === 'MFN' && ['Unshipped', 'PartiallyShipped', 'Shipped'].includes(String(order.OrderStatus));
}

/** GetOrderResponse for the v0 fixture `order` with its `items`. */
export function orderV2026(order: Obj, items: readonly Obj[], want: ReadonlySet<OrdersV2026Dataset>): { order: Obj } {
  const salesChannel: Obj = { channelName: 'AMAZON' };
  if (typeof order.MarketplaceId === 'string') salesChannel.marketplaceId = order.MarketplaceId;
  if (typeof order.SalesChannel === 'string') salesChannel.marketplaceName = order.SalesChannel;
  const out: Obj = {
    orderId: order.AmazonOrderId,
    createdTime: order.PurchaseDate,
    lastUpdatedTime: order.LastUpdateDate,
    salesChannel,
  };
  if (order.IsPrime === true) out.programs = ['PRIME'];
  const buyer = isObj(order.BuyerInfo) ? order.BuyerInfo : undefined;
  if (want.has('BUYER') && buyer) {
    const b: Obj = {};
    if (typeof buyer.BuyerName === 'string') b.buyerName = buyer.BuyerName;
    if (typeof buyer.BuyerEmail === 'string' && emailGiven(order)) b.buyerEmail = buyer.BuyerEmail;
    out.buyer = b;
  }
  // Like v0's ShippingAddress, only there for orders that have one (not Pending).
  if (want.has('RECIPIENT') && isObj(order.ShippingAddress)) out.recipient = { deliveryAddress: address(order.ShippingAddress) };
  if (want.has('PROCEEDS') && isObj(order.OrderTotal)) out.proceeds = { grandTotal: money(order.OrderTotal) };
  if (want.has('FULFILLMENT') && typeof order.OrderStatus === 'string') {
    const f: Obj = { fulfillmentStatus: FULFILLMENT_STATUS[order.OrderStatus] ?? order.OrderStatus };
    if (typeof order.FulfillmentChannel === 'string') f.fulfilledBy = FULFILLED_BY[order.FulfillmentChannel] ?? order.FulfillmentChannel;
    out.fulfillment = f;
  }
  out.orderItems = items.map((i) => orderItem(i, want));
  return { order: out };
}

/**
 * `includedData` as SP-API reads an array query parameter (Swagger 2.0's
 * default csv, repeated keys accepted too); undefined when a value is not
 * in the enum.
 */
export function parseIncludedData(query: URLSearchParams): Set<OrdersV2026Dataset> | undefined {
  const out = new Set<OrdersV2026Dataset>();
  for (const raw of query.getAll('includedData').flatMap((v) => v.split(','))) {
    const v = raw.trim();
    if (v === '') continue;
    if (!(ORDERS_V2026_DATASETS as readonly string[]).includes(v)) return undefined;
    out.add(v as OrdersV2026Dataset);
  }
  return out;
}
