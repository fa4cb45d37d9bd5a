/**
 * What makes `shopify_refund.create` safe to resend (VENDORS.md §1.9): one
 * `@idempotent` key per logical refund, derived from the ledger identity, and
 * an input that is the same on every attempt.
 */
import { createHash } from 'node:crypto';
import type { FailedOutcome } from '../vendor-handler.js';
import { isRecord } from './shopify.client.js';

// Fixed namespace of the gateway's refund keys (a random UUID, never change it:
// keys already sent to Shopify would no longer match their retries).
const REFUND_KEY_NAMESPACE = Buffer.from('6f1c7a52c3e94d0b8a4e0c9b5d2f7e13', 'hex');

/**
 * UUIDv5 (RFC 9562) of the ledger idempotency identity. Deliberately NOT the
 * attempt number or the tool-call id alone: every retry, crash recovery or
 * approval pick-up of the same ledger call must present the same key.
 */
export function refundIdempotencyKey(orgId: string, idempotencyKey: string): string {
  // JSON keeps the two parts unambiguous ("a|b" + "c" vs "a" + "b|c").
  const name = JSON.stringify(['shopify.refundCreate', orgId, idempotencyKey]);
  const hash = createHash('sha1').update(REFUND_KEY_NAMESPACE).update(name, 'utf8').digest();
  hash[6] = (hash[6] & 0x0f) | 0x50;
  hash[8] = (hash[8] & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** "12.5" → "12.50": one spelling per amount, so equal amounts give equal inputs. */
export function formatAmount(amount: string): string {
  const [whole, frac = ''] = amount.split('.');
  return `${String(Number(whole))}.${frac.padEnd(2, '0')}`;
}

export interface RefundParent {
  id: string;
  gateway: string;
}

/**
 * The payment the money goes back to. Chosen from the order's successful
 * SALE/CAPTURE transactions by position only — never by what is still
 * refundable — so a retry after an applied-but-unanswered attempt picks the
 * same parent and sends the same input (Shopify then replays the original).
 */
export function pickRefundParent(order: Record<string, unknown>): RefundParent | undefined {
  const txs = Array.isArray(order.transactions) ? order.transactions : [];
  for (const t of txs) {
    if (!isRecord(t) || t.status !== 'SUCCESS' || (t.kind !== 'SALE' && t.kind !== 'CAPTURE')) continue;
    if (typeof t.id === 'string' && typeof t.gateway === 'string') return { id: t.id, gateway: t.gateway };
  }
  return undefined;
}

/**
 * The currency a refund is made in: the order's presentment currency (the one
 * the customer paid in), which Shopify requires in `currency` when it differs
 * from the shop's (VENDORS.md §1.8). It is a fact of the order that never
 * changes, so every attempt sends the same input.
 */
export function refundCurrency(order: Record<string, unknown>): string | undefined {
  const code = order.presentmentCurrencyCode ?? order.currencyCode;
  return typeof code === 'string' && CURRENCY.test(code) ? code : undefined;
}

const CURRENCY = /^[A-Z]{3}$/;

/**
 * Why a refund's currency does not fit the order, or null. The amount is in
 * the currency the customer paid in; when that is not the shop's, the call
 * must say so (`currency`), so that the ledger, the policy rules (amount
 * thresholds) and an approver all see which currency the amount is in — a
 * bare "95" must not mean KWD where a rule was written in USD.
 */
export function refundCurrencyProblem(order: Record<string, unknown>, asked: unknown): string | null {
  const paid = refundCurrency(order);
  const shop = typeof order.currencyCode === 'string' && CURRENCY.test(order.currencyCode) ? order.currencyCode : undefined;
  // Shopify did not say: a currency named by the call could not be checked, so it is not taken on trust.
  if (paid === undefined) return typeof asked === 'string' ? 'shopify did not say which currency the order was paid in: refund without naming one' : null;
  if (typeof asked === 'string') return asked === paid ? null : `the customer paid in ${paid}: the refund amount must be in ${paid} (currency "${paid}")`;
  return shop === undefined || paid === shop ? null : `the customer paid in ${paid}, not the shop's ${shop}: give currency "${paid}" to refund in it`;
}

export function buildRefundInput(
  orderGid: string,
  amount: string,
  note: string | undefined,
  toolCallId: string,
  parent: RefundParent,
  currency: string | undefined,
): Record<string, unknown> {
  // The ledger id in the note makes a read-back reconcile exact (VENDORS.md §1.9, point 4).
  const marker = `[tool-gateway call ${toolCallId}]`;
  return {
    orderId: orderGid,
    note: note ? `${note} ${marker}` : marker,
    notify: false,
    ...(currency === undefined ? {} : { currency }),
    transactions: [{ orderId: orderGid, parentId: parent.id, amount: formatAmount(amount), gateway: parent.gateway, kind: 'REFUND' }],
  };
}

/** Shopify gives no wait for "in progress"; one second keeps the poll light. */
const IN_PROGRESS_POLL_MS = 1_000;

/**
 * refundCreate's userErrors carry no code (VENDORS.md §1.8), so they are told
 * apart by message; the outcome message is always our own text.
 */
export function refundUserErrorOutcome(userErrors: unknown[]): FailedOutcome {
  const text = userErrors.map((e) => (isRecord(e) && typeof e.message === 'string' ? e.message : '')).join(' ').toLowerCase();
  const base = { ok: false as const, vendorStatus: 200, requestSent: true };
  // Both answers prove that an earlier attempt under this key reached Shopify
  // (VENDORS.md §1.9 point 6): the refund may exist, so neither is a failure.
  if (text.includes('same idempotency key')) {
    // Reconcile, never re-key: a new key would be a second refund.
    return { ...base, kind: 'key_conflict', message: 'shopify already has a refund attempt under this idempotency key, with other parameters: reconcile' };
  }
  if (text.includes('currently in progress')) {
    // Still running at Shopify: asking again with the same key is harmless and
    // hands back the original refund once it is done.
    return { ...base, kind: 'in_progress', retryAfterMs: IN_PROGRESS_POLL_MS, message: 'shopify says an earlier attempt of this refund (same idempotency key) is still in progress' };
  }
  if (text.includes('does not exist')) return { ...base, kind: 'not_found', message: 'shopify order not found' };
  if (/exceed|maximum refundable|more than|sales cap/.test(text)) {
    return { ...base, kind: 'rejected', message: 'refund amount is more than is still refundable on the order' };
  }
  return { ...base, kind: 'rejected', message: 'shopify refused the refund (validation errors)' };
}
