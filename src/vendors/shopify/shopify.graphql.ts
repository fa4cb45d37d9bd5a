/**
 * The GraphQL Admin documents the gateway sends. They select only what the
 * normaliser uses: query cost and customer PII both grow with the selection.
 */

/**
 * How many entries each list of a read asks for (`first:`): one request per call, never paged with `after:`, so
 * a longer list comes back cut, and the result says so (`truncated`). Connections (lineItems, variants) tell it
 * with `pageInfo.hasNextPage`; Order.fulfillments and Fulfillment.trackingInfo are plain lists, which say nothing:
 * they are asked for one entry more than is kept, and that entry coming back is what says there are more.
 * Connections are costed by `first` (VENDORS.md §1.5): raising these raises every read's cost.
 */
export const ORDER_LIST_FIRST = { lineItems: 50, fulfillments: 20, trackingInfo: 10 } as const;
export const PRODUCT_VARIANTS_FIRST = 50;

export const ORDER_QUERY = `query OrderLookup($id: ID!) {
  order(id: $id) {
    id
    name
    displayFinancialStatus
    displayFulfillmentStatus
    presentmentCurrencyCode
    totalPriceSet { presentmentMoney { amount } }
    totalRefundedSet { presentmentMoney { amount } }
    email
    phone
    customer { defaultEmailAddress { emailAddress } defaultPhoneNumber { phoneNumber } }
    shippingAddress { name address1 address2 city province provinceCode zip country countryCodeV2 phone }
    lineItems(first: ${ORDER_LIST_FIRST.lineItems}) { nodes { name quantity sku originalUnitPriceSet { presentmentMoney { amount } } } pageInfo { hasNextPage } }
    fulfillments(first: ${ORDER_LIST_FIRST.fulfillments + 1}) { status trackingInfo(first: ${ORDER_LIST_FIRST.trackingInfo + 1}) { number company url } }
    note
  }
}`;

export const PRODUCT_QUERY = `query ProductLookup($id: ID!) {
  product(id: $id) {
    id
    title
    handle
    status
    vendor
    productType
    totalInventory
    variants(first: ${PRODUCT_VARIANTS_FIRST}) { nodes { id title sku price inventoryQuantity } pageInfo { hasNextPage } }
  }
}`;

export const ORDER_NOTE_MUTATION = `mutation OrderNote($input: OrderInput!) {
  orderUpdate(input: $input) {
    order { id note }
    userErrors { field message }
  }
}`;

/**
 * Reads the payments a refund goes back to: real Shopify needs the parent
 * transaction's gateway, and with split tender what is still refundable on
 * each payment (OrderTransaction.maximumRefundableV2; else the amount it took,
 * amountSet) says which one can take the refund.
 */
export const REFUND_CONTEXT_QUERY = `query RefundContext($id: ID!) {
  order(id: $id) {
    id
    currencyCode
    presentmentCurrencyCode
    transactions(first: 20) {
      id kind status gateway
      amountSet { shopMoney { amount currencyCode } presentmentMoney { amount currencyCode } }
      maximumRefundableV2 { amount currencyCode }
    }
  }
}`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The key is written as a literal, as in Shopify's own examples. It is always
 * a UUID we derived (checked here), so nothing from a request reaches the text.
 */
export function refundMutation(idempotencyKey: string): string {
  if (!UUID.test(idempotencyKey)) throw new Error('refund idempotency key must be a lower-case UUID');
  return `mutation Refund($input: RefundInput!) {
  refundCreate(input: $input) @idempotent(key: "${idempotencyKey}") {
    refund {
      id
      note
      createdAt
      totalRefundedSet { shopMoney { amount currencyCode } presentmentMoney { amount currencyCode } }
      transactions(first: 10) { nodes { id status kind gateway amountSet { shopMoney { amount currencyCode } } } }
    }
    userErrors { field message }
  }
}`;
}
