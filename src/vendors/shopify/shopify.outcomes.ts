/** Shopify's GraphQL answers, read into the outcomes the gateway returns (after the request itself succeeded). */
import { failedOutcome, type VendorCallContext, type VendorOutcome } from '../vendor-handler.js';
import { isRecord, type GraphqlResult } from './shopify.client.js';
import { normalizeOrder, normalizeProduct, normalizeRefund, unknownOutcomeStatus } from './shopify.normalize.js';
import { orderMissing, refundUserErrorOutcome } from './shopify.refund.js';

type GraphqlAnswer = Extract<GraphqlResult, { ok: true }>;

/**
 * `unavailable`: the fields Shopify refused to the app (a scope it lacks), relative to the root object,
 * so the model knows a null customer means "not allowed", not "none". Absent when nothing was refused.
 */
function unavailable(denied: string[] | undefined, root: string): { unavailable?: string[] } {
  if (!denied || denied.length === 0) return {};
  return { unavailable: denied.map((p) => (p.startsWith(`${root}.`) ? p.slice(root.length + 1) : p)) };
}

/**
 * An answer about another object than the one asked for: `order(id:)` and `product(id:)` answer that object or null, so
 * a different id is a proxy or cache mixing answers up: another customer's data, never handed back as this one's.
 */
function answersAnother(found: Record<string, unknown>, type: 'Order' | 'Product', id: unknown): boolean {
  return typeof found.id === 'string' && found.id !== `gid://shopify/${type}/${String(id)}`;
}

export function orderLookupOutcome(ctx: VendorCallContext, res: GraphqlAnswer): VendorOutcome {
  const order = res.data.order;
  // Unknown ids (and orders outside the 60-day window without read_all_orders) come back as null.
  if (order === null || order === undefined) return failedOutcome('not_found', 'shopify order not found', res.vendorStatus);
  if (!isRecord(order)) return failedOutcome('bad_response', 'shopify order has an unexpected shape', res.vendorStatus);
  if (answersAnother(order, 'Order', ctx.params.orderId)) return failedOutcome('bad_response', 'shopify answered with another order than the one asked for', res.vendorStatus);
  return { ok: true, data: { ...normalizeOrder(String(ctx.params.orderId), order), ...unavailable(res.denied, 'order') }, vendorStatus: res.vendorStatus };
}

export function productOutcome(ctx: VendorCallContext, res: GraphqlAnswer): VendorOutcome {
  const product = res.data.product;
  if (product === null || product === undefined) return failedOutcome('not_found', 'shopify product not found', res.vendorStatus);
  if (!isRecord(product)) return failedOutcome('bad_response', 'shopify product has an unexpected shape', res.vendorStatus);
  if (answersAnother(product, 'Product', ctx.params.productId)) return failedOutcome('bad_response', 'shopify answered with another product than the one asked for', res.vendorStatus);
  return { ok: true, data: { ...normalizeProduct(String(ctx.params.productId), product), ...unavailable(res.denied, 'product') }, vendorStatus: res.vendorStatus };
}

export function noteUpdateOutcome(ctx: VendorCallContext, res: GraphqlAnswer, note: string): VendorOutcome {
  const payload = res.data.orderUpdate;
  if (!isRecord(payload)) return failedOutcome('bad_response', 'shopify orderUpdate answer has an unexpected shape', res.vendorStatus);
  const errors = Array.isArray(payload.userErrors) ? payload.userErrors : [];
  if (errors.length > 0) {
    // OrderInput carries the order's id as `id`; a missing anything else is a refusal of the input.
    return errors.some((e) => orderMissing(e, 'id'))
      ? failedOutcome('not_found', 'shopify order not found', res.vendorStatus)
      : failedOutcome('rejected', 'shopify refused the note update (validation errors)', res.vendorStatus);
  }
  const order = isRecord(payload.order) ? payload.order : {};
  return { ok: true, data: { orderId: String(ctx.params.orderId), note: typeof order.note === 'string' ? order.note : note }, vendorStatus: res.vendorStatus };
}

export function refundCreateOutcome(ctx: VendorCallContext, res: GraphqlAnswer): VendorOutcome {
  const payload = res.data.refundCreate;
  if (!isRecord(payload)) return failedOutcome('bad_response', 'shopify refundCreate answer has an unexpected shape', res.vendorStatus);
  const errors = Array.isArray(payload.userErrors) ? payload.userErrors : [];
  if (errors.length > 0) return refundUserErrorOutcome(errors);
  if (!isRecord(payload.refund)) return failedOutcome('bad_response', 'shopify refundCreate returned no refund', res.vendorStatus);
  const refund = normalizeRefund(String(ctx.params.orderId), payload.refund);
  if (refund.status === 'failed') {
    // The refund record exists but no money moved (VENDORS.md §1.8, point 7 of §1.9).
    return failedOutcome('rejected', 'shopify recorded the refund but its payment transaction failed', res.vendorStatus);
  }
  if (refund.status === 'error') {
    // A 2xx that does not say what happened (a transaction in ERROR, UNKNOWN or a status not known here): the write's
    // outcome is unknown (OUTCOME_UNKNOWN), never a failure to redo nor a success.
    // The answer itself was read, and Shopify answered well: the payment provider's trouble, not Shopify's health.
    const status = unknownOutcomeStatus(payload.refund) ?? 'an unrecognised status';
    return { ...failedOutcome('bad_response', `shopify recorded the refund but its payment transaction ended in ${status}: whether the money moved is unknown`, res.vendorStatus), answerRead: true };
  }
  return { ok: true, data: refund, vendorStatus: res.vendorStatus };
}
