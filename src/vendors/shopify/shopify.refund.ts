/**
 * What makes `shopify_refund.create` safe to resend (VENDORS.md §1.9): one
 * `@idempotent` key per logical refund, derived from the ledger identity, and
 * an input that is the same on every attempt.
 */
import { createHash } from 'node:crypto';
import type { FailedOutcome } from '../vendor-handler.js';
import { idempotencyInProgress, idempotencyKeyConflict, isRecord } from './shopify.client.js';

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

// ISO 4217 minor units of the currencies that do not have 2 (CLF and UYW, with 4, are no currency a customer pays in).
const NO_DECIMALS = new Set(['BIF', 'CLP', 'DJF', 'GNF', 'ISK', 'JPY', 'KMF', 'KRW', 'PYG', 'RWF', 'UGX', 'VND', 'VUV', 'XAF', 'XOF', 'XPF']);
const THREE_DECIMALS = new Set(['BHD', 'IQD', 'JOD', 'KWD', 'LYD', 'OMR', 'TND']);

/** How many decimals an amount in the currency has; an unknown or unsaid currency has 2, like most. */
export function currencyDecimals(currency: string | undefined): number {
  if (currency === undefined) return 2;
  return NO_DECIMALS.has(currency) ? 0 : THREE_DECIMALS.has(currency) ? 3 : 2;
}

/**
 * Why the amount cannot be refunded exactly in the currency, or null: a digit
 * other than 0 beyond its minor unit ("100.5" JPY, "12.345" USD). Trailing
 * zeros are the same amount ("100.00" JPY is 100). Refused before sending:
 * Shopify may refuse it or round it to the minor unit, and a rounded refund is
 * another amount than the one the policy and the approver saw.
 */
export function refundAmountProblem(amount: string, currency: string | undefined): string | null {
  const decimals = currencyDecimals(currency);
  const frac = amount.split('.')[1] ?? '';
  if (!/[1-9]/.test(frac.slice(decimals))) return null;
  const which = currency ?? 'the order\'s currency (Shopify did not say which)';
  return decimals === 0
    ? `${which} has no decimals: the refund amount "${amount}" must be a whole number`
    : `${which} has ${decimals} decimals: the refund amount "${amount}" has more`;
}

/**
 * The amount written with exactly the currency's `decimals` ("12.5" → "12.50",
 * "12.500" with 3, "100.00" → "100" with 0): one spelling per amount and
 * currency, so equal amounts give equal inputs and a resend under the same
 * @idempotent key sends the same input. Only the zeros refundAmountProblem
 * allows are dropped: anything else would refund another amount.
 */
export function formatAmount(amount: string, decimals: number): string {
  const [whole, frac = ''] = amount.split('.');
  if (/[1-9]/.test(frac.slice(decimals))) throw new Error(`formatAmount: ${amount} has more than ${decimals} decimals`);
  const units = String(Number(whole));
  return decimals === 0 ? units : `${units}.${frac.padEnd(decimals, '0').slice(0, decimals)}`;
}

export interface RefundParent {
  id: string;
  gateway: string;
}

/** Shopify's gateway name for gift cards. */
const GIFT_CARD_GATEWAY = 'gift_card';
const DECIMAL = /^\d{1,15}(\.\d{1,4})?$/;

/** What a payment took, in the currency the customer paid in (the refund amount's), when Shopify said. */
function paidAmount(t: Record<string, unknown>): number | undefined {
  const set = isRecord(t.amountSet) ? t.amountSet : undefined;
  const money = set && (isRecord(set.presentmentMoney) ? set.presentmentMoney : isRecord(set.shopMoney) ? set.shopMoney : undefined);
  const amount = money?.amount;
  return typeof amount === 'string' && DECIMAL.test(amount) ? Number(amount) : undefined;
}

/**
 * What is still refundable on a payment (OrderTransaction.maximumRefundableV2,
 * VENDORS.md §1.8, §1.9 point 3), when Shopify said so in the refund's
 * currency: a figure in another one (the shop's, say) is no ceiling for it.
 */
function refundableAmount(t: Record<string, unknown>, currency: string | undefined): number | undefined {
  const money = isRecord(t.maximumRefundableV2) ? t.maximumRefundableV2 : undefined;
  if (money === undefined || typeof money.amount !== 'string' || !DECIMAL.test(money.amount)) return undefined;
  if (currency !== undefined && money.currencyCode !== currency) return undefined;
  return Number(money.amount);
}

/**
 * The payment the money goes back to, among the order's successful
 * SALE/CAPTURE payments. Split tender (a gift card and a card, say): a payment
 * other than a gift card first, as the customer would expect the money back
 * where they paid; then the first whose still-refundable amount covers the
 * refund (after 30.00 of a 35.00 card went back, a 10.00 refund fits the
 * 10.00 gift card, not the card); Shopify did not say → the first whose
 * original amount covers it; none → the first preferred one, and Shopify says
 * how much is refundable. What is still refundable changes with every refund,
 * this call's own included: the handler picks once per call and sends that
 * choice on every attempt (refundParentOf), so a retry after an
 * applied-but-unanswered attempt sends the same input and Shopify replays it.
 */
export function pickRefundParent(order: Record<string, unknown>, amount: string, currency?: string): RefundParent | undefined {
  const txs = Array.isArray(order.transactions) ? order.transactions : [];
  const payments: Array<RefundParent & { paid: number | undefined; refundable: number | undefined }> = [];
  for (const t of txs) {
    if (!isRecord(t) || t.status !== 'SUCCESS' || (t.kind !== 'SALE' && t.kind !== 'CAPTURE')) continue;
    if (typeof t.id === 'string' && typeof t.gateway === 'string') {
      payments.push({ id: t.id, gateway: t.gateway, paid: paidAmount(t), refundable: refundableAmount(t, currency) });
    }
  }
  // Stable: equal preference keeps Shopify's order of the payments.
  const preferred = [...payments.filter((p) => p.gateway !== GIFT_CARD_GATEWAY), ...payments.filter((p) => p.gateway === GIFT_CARD_GATEWAY)];
  const wanted = Number(amount); // a plain decimal (the schema's pattern): "0100.50" is 100.5
  const chosen =
    preferred.find((p) => p.refundable !== undefined && p.refundable >= wanted) ??
    preferred.find((p) => p.paid !== undefined && p.paid >= wanted) ??
    preferred[0];
  return chosen && { id: chosen.id, gateway: chosen.gateway };
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
  // Shopify named the customer's currency but not the shop's: whether a bare amount is in the shop's money (as a rule
  // written without `currency` takes it) cannot be told, so the call must say.
  if (shop === undefined) return `shopify did not say the shop's currency: give currency "${paid}" to refund in ${paid}`;
  return paid === shop ? null : `the customer paid in ${paid}, not the shop's ${shop}: give currency "${paid}" to refund in it`;
}

/**
 * The model's note with any marker of its own made inert: a note naming another call's id gave a refund naming two
 * ledger calls, and an operator reconciling that other call by its marker could settle it by this refund. A note that
 * mentions the marker's words at all, read as a person reads it (compatibility forms, invisible format characters
 * dropped, any dash a hyphen, any case), has every bracket that reads as "[" turned into "(": only the gateway's own
 * marker, appended last, keeps one.
 */
export function defusedMarkers(note: string): string {
  const read = note.normalize('NFKC').replace(/\p{Cf}/gu, '').replace(/\p{Pd}/gu, '-').toLowerCase();
  return /tool\s*-\s*gateway\s*call/.test(read) ? note.replace(/[[\uFE47\uFF3B]/g, '(') : note;
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
    note: note ? `${defusedMarkers(note)} ${marker}` : marker,
    notify: false,
    ...(currency === undefined ? {} : { currency }),
    transactions: [{ orderId: orderGid, parentId: parent.id, amount: formatAmount(amount, currencyDecimals(currency)), gateway: parent.gateway, kind: 'REFUND' }],
  };
}

const FIELD_PART = /^[A-Za-z0-9_]{1,64}$/;
const MISSING = /does not exist|not found/i;

/** The userError's field as `a.b.c`, or null when there is none or it is not plain schema names. */
function fieldOf(e: unknown): string | null {
  if (!isRecord(e) || !Array.isArray(e.field) || e.field.length === 0) return null;
  const parts = e.field.map(String);
  return parts.length <= 8 && parts.every((p) => FIELD_PART.test(p)) ? parts.join('.') : null;
}

/**
 * "Order does not exist" is a fact about the order only when it names it:
 * the field that carries the order's id (`orderField`: "orderId" for
 * refundCreate, "id" for orderUpdate), or no field and a message about the
 * order. Another missing object (the parent transaction, a line item) is a
 * refusal of the input, not "the order does not exist" — which would tell
 * the agent an order it has is gone.
 */
export function orderMissing(e: unknown, orderField: string): boolean {
  if (!isRecord(e) || typeof e.message !== 'string' || !MISSING.test(e.message)) return false;
  if (Array.isArray(e.field) && e.field.length > 0) return fieldOf(e) === orderField;
  return /^order\b/i.test(e.message.trim());
}

/**
 * refundCreate's userErrors carry no code (VENDORS.md §1.8), so they are told
 * apart by message; the outcome message is always our own text.
 */
export function refundUserErrorOutcome(userErrors: unknown[]): FailedOutcome {
  const text = userErrors.map((e) => (isRecord(e) && typeof e.message === 'string' ? e.message : '')).join(' ').toLowerCase();
  const base = { ok: false as const, vendorStatus: 200, requestSent: true };
  // Both answers prove that an earlier attempt under this key reached Shopify
  // (VENDORS.md §1.9 point 6): the refund may exist, so neither is a failure.
  if (text.includes('same idempotency key')) return idempotencyKeyConflict(200);
  if (text.includes('currently in progress')) return idempotencyInProgress(200);
  if (userErrors.some((e) => orderMissing(e, 'orderId'))) return { ...base, kind: 'not_found', message: 'shopify order not found' };
  if (/exceed|maximum refundable|more than|sales cap/.test(text)) {
    return { ...base, kind: 'rejected', message: 'refund amount is more than is still refundable on the order' };
  }
  const missing = userErrors.find((e) => isRecord(e) && typeof e.message === 'string' && MISSING.test(e.message));
  if (missing !== undefined) {
    const field = fieldOf(missing);
    return { ...base, kind: 'rejected', message: `shopify refused the refund: something it refers to does not exist${field ? ` (${field})` : ''}` };
  }
  return { ...base, kind: 'rejected', message: 'shopify refused the refund (validation errors)' };
}
