/**
 * What a refund call carries across its attempts (ctx.scratch): its lease holder, whether it holds the lease, whether it may
 * still run at Shopify, the payment it refunds to.
 */
import { hasFinalStatusClass, type VendorCallContext, type VendorOutcome } from '../vendor-handler.js';
import type { RefundParent } from './shopify.refund.js';

/** Set once the call has taken the order's refund lease (its later attempts renew it). */
export const LEASE_TAKEN = 'shopify.refundLeaseTaken';
/** Set once an attempt of the call may still be running at Shopify: from then on the call never gives the lease up. */
export const MAY_STILL_RUN = 'shopify.refundMayStillRun';
/**
 * Set once an order read of the call has been answered by the shop: its credentials reach it. The order's lease is
 * shared by every org that names the shop, so none is taken before (a later attempt, same credentials, need not read twice).
 */
export const SHOP_REACHED = 'shopify.refundShopReached';
const PARENT = 'shopify.refundParent';

/**
 * The lease holder of this call: its id, the same on every attempt, so a retry takes its own lease back instead of
 * waiting for it; and the reconcile of the call, once ops have settled it at Shopify, frees the lease an indeterminate
 * refund keeps (ReconcileService), instead of every refund of the order waiting for it to expire.
 */
export function refundLeaseHolder(ctx: VendorCallContext): string {
  return ctx.toolCallId;
}

/**
 * The refund left and no final answer came: lost or cut off in flight, a 5xx
 * (an edge answers while Shopify goes on), an error answer that may come from
 * outside the run, an answer whose status no HTTP class covers (it cannot be
 * placed either), or Shopify still running an earlier attempt under the key.
 * It may still be in flight there.
 */
export function mayStillRun(o: VendorOutcome): boolean {
  if (o.ok || !o.requestSent) return false;
  if (o.vendorStatus !== undefined && !hasFinalStatusClass(o.vendorStatus)) return true;
  if (o.kind === 'bad_response') return o.mayStillRun === true; // a path-less "Timeout", say: no final answer either
  return o.kind === 'timeout' || o.kind === 'network' || o.kind === 'server_error' || o.kind === 'in_progress';
}

/**
 * The payment this call refunds to: picked on its first attempt that gets that far, then the same on every later
 * one. The pick reads what is still refundable, which an applied-but-unanswered attempt of this very call lowers:
 * picking again could move the retry to another payment, and Shopify refuses the same @idempotent key with other
 * parameters instead of replaying the refund (VENDORS.md §1.9 point 2).
 */
export function refundParentOf(ctx: VendorCallContext, pick: () => RefundParent | undefined): RefundParent | undefined {
  const kept = ctx.scratch.get(PARENT) as RefundParent | undefined;
  if (kept !== undefined) return kept;
  const parent = pick();
  if (parent !== undefined) ctx.scratch.set(PARENT, parent);
  return parent;
}

/** Nothing of this call can still land at Shopify (its lease given back): its next attempt picks the payment afresh. */
export function forgetRefundParent(ctx: VendorCallContext): void {
  ctx.scratch.delete(PARENT);
}
