/**
 * The emulator's `refundCreate`, with Shopify's `@idempotent` semantics
 * (VENDORS.md §1.9): the same key with the same input returns the original
 * refund; the same key with other input is refused; the same key while its
 * first request is still being processed is refused as "in progress"; a
 * request refused by validation does not use the key up; a key is kept 24 h
 * from its first use, after which a resend is a new refund. Keys are per shop
 * (one emulated shop).
 */
import type { EmuOrder, EmuRefund, EmuTransaction, EmuTransactionStatus } from './shopify.fixtures.js';
import { currencyDecimals, formatMinor, gid, refundableMinor, refundView } from './shopify.graphql-view.js';

export interface UserError {
  field: string[] | null;
  message: string;
}

export interface RefundPayload {
  refund: Record<string, unknown> | null;
  order: Record<string, unknown> | null;
  userErrors: UserError[];
}

export const KEY_MISMATCH_MESSAGE = 'The same idempotency key cannot be used with different operation parameters.';
/** IDEMPOTENCY_CONCURRENT_REQUEST of the other @idempotent mutations; refundCreate's userErrors carry no code. */
export const IN_PROGRESS_MESSAGE = 'This request is currently in progress, please try again.';
// Shopify's Decimal takes any precision: whether the digits fit the currency is checked after (TOO_PRECISE).
const AMOUNT = /^(\d{1,12})(?:\.(\d{1,12}))?$/;
const TOO_PRECISE = 'too precise';
const ORDER_GID = /^gid:\/\/shopify\/Order\/(\d+)$/;
const TX_GID = /^gid:\/\/shopify\/OrderTransaction\/(\d+)$/;
/** How long Shopify keeps an @idempotent key (VENDORS.md §1.9). */
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 3600_000;

/** Key order must not matter when comparing two inputs. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The amount in minor units of the currency (KWD "12.345" → 12345 fils), undefined when it is no amount,
 * TOO_PRECISE when it has a digit other than 0 beyond the currency's minor unit ("100.5" JPY).
 */
function toMinor(amount: unknown, currency: string): number | typeof TOO_PRECISE | undefined {
  const text = typeof amount === 'number' ? String(amount) : amount;
  const m = typeof text === 'string' ? AMOUNT.exec(text) : null;
  if (!m) return undefined;
  const decimals = currencyDecimals(currency);
  const frac = m[2] ?? '';
  if (/[1-9]/.test(frac.slice(decimals))) return TOO_PRECISE;
  return Number(m[1]) * 10 ** decimals + Number(frac.padEnd(decimals, '0').slice(0, decimals));
}

function refused(userErrors: UserError[]): RefundPayload {
  return { refund: null, order: null, userErrors };
}

export class ShopifyRefundDesk {
  /** Keys that made a refund, with when (ms since epoch); insertion order is first-use order. */
  private readonly byKey = new Map<string, { digest: string; payload: RefundPayload; usedAt: number }>();
  /** Keys whose first request is still being processed, with how many such runs hold each. */
  private readonly inFlight = new Map<string, number>();
  private nextRefundId = 900_000_001;
  private nextTxId = 990_000_001;
  /**
   * The status of the refund transactions made from now on. SUCCESS unless a test sets another: a refund
   * record is not proof money moved (VENDORS.md §1.8), and the status is what says whether it did.
   */
  transactionStatus: EmuTransactionStatus = 'SUCCESS';

  reset(): void {
    this.byKey.clear();
    this.inFlight.clear();
    this.nextRefundId = 900_000_001;
    this.nextTxId = 990_000_001;
    this.transactionStatus = 'SUCCESS';
  }

  /** A request under `key` is being processed until the returned function is called. */
  begin(key: string): () => void {
    this.inFlight.set(key, (this.inFlight.get(key) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const left = (this.inFlight.get(key) ?? 1) - 1;
      if (left > 0) this.inFlight.set(key, left);
      else this.inFlight.delete(key);
    };
  }

  /** `key` undefined: an API version without @idempotent, every call is a new refund. */
  create(orders: Map<number, EmuOrder>, key: string | undefined, input: unknown): RefundPayload {
    if (key !== undefined && this.inFlight.has(key)) return refused([{ field: null, message: IN_PROGRESS_MESSAGE }]);
    const now = Date.now(); // the clock the emulator's token expiries use too, so tests can fake it
    this.forgetKeysUsedBefore(now - IDEMPOTENCY_KEY_TTL_MS);
    const digest = canonical(input);
    const earlier = key === undefined ? undefined : this.byKey.get(key);
    if (earlier) return earlier.digest === digest ? earlier.payload : refused([{ field: null, message: KEY_MISMATCH_MESSAGE }]);

    const inp = (input && typeof input === 'object' ? input : {}) as Record<string, unknown>;
    const orderMatch = typeof inp.orderId === 'string' ? ORDER_GID.exec(inp.orderId) : null;
    const order = orderMatch ? orders.get(Number(orderMatch[1])) : undefined;
    if (!order) return refused([{ field: ['orderId'], message: 'Order does not exist' }]);
    // RefundInput.currency: "the presentment currency ... required for orders where
    // the currency and presentment currency differ" (VENDORS.md §1.8; wording assumed).
    const currency = inp.currency === undefined || inp.currency === null ? undefined : inp.currency;
    if (currency === undefined ? order.presentmentCurrencyCode !== order.currencyCode : currency !== order.presentmentCurrencyCode) {
      return refused([{ field: ['currency'], message: `Currency must be the presentment currency of the order (${order.presentmentCurrencyCode})` }]);
    }

    const lines = Array.isArray(inp.transactions) ? (inp.transactions as Array<Record<string, unknown>>) : [];
    const paidIn = order.presentmentCurrencyCode;
    const planned: Array<{ parent: EmuTransaction; minor: number; gateway: string }> = [];
    for (const [i, line] of lines.entries()) {
      const field = (name: string): string[] => ['transactions', String(i), name];
      const minor = toMinor(line.amount, paidIn);
      // Wording assumed: Shopify's message for it is not documented.
      if (minor === TOO_PRECISE) return refused([{ field: field('amount'), message: `Amount has too many decimal places for ${paidIn}` }]);
      if (minor === undefined || minor <= 0) return refused([{ field: field('amount'), message: 'Amount must be greater than 0' }]);
      if (line.kind !== 'REFUND') return refused([{ field: field('kind'), message: 'Kind is not supported for refunds' }]);
      const parentMatch = typeof line.parentId === 'string' ? TX_GID.exec(line.parentId) : null;
      const parent = order.transactions.find((t) =>
        parentMatch ? t.id === Number(parentMatch[1]) : (t.kind === 'SALE' || t.kind === 'CAPTURE') && t.gateway === line.gateway,
      );
      if (!parent) return refused([{ field: field('parentId'), message: 'Parent transaction does not exist' }]);
      if (line.gateway !== parent.gateway) return refused([{ field: field('gateway'), message: 'Gateway does not match the parent transaction' }]);
      const already = planned.filter((p) => p.parent === parent).reduce((s, p) => s + p.minor, 0);
      const left = refundableMinor(order, parent) - already;
      if (minor > left) {
        return refused([
          {
            field: field('amount'),
            message: `Refund amount ${formatMinor(minor, paidIn)} ${paidIn} exceeds the maximum refundable amount ${formatMinor(Math.max(0, left), paidIn)} ${paidIn}`,
          },
        ]);
      }
      planned.push({ parent, minor, gateway: parent.gateway });
    }

    const refund: EmuRefund = {
      id: this.nextRefundId++,
      note: typeof inp.note === 'string' ? inp.note : null,
      amountCents: planned.reduce((s, p) => s + p.minor, 0),
      createdAt: new Date().toISOString(),
      transactionIds: [],
    };
    for (const p of planned) {
      const tx: EmuTransaction = { id: this.nextTxId++, kind: 'REFUND', status: this.transactionStatus, gateway: p.gateway, amountCents: p.minor, parentId: p.parent.id };
      order.transactions.push(tx);
      refund.transactionIds.push(tx.id);
    }
    order.refunds.push(refund);
    const paid = order.transactions.filter((t) => (t.kind === 'SALE' || t.kind === 'CAPTURE') && t.status === 'SUCCESS').reduce((s, t) => s + t.amountCents, 0);
    const refunded = order.refunds.reduce((s, r) => s + r.amountCents, 0);
    if (refunded > 0) order.displayFinancialStatus = refunded >= paid ? 'REFUNDED' : 'PARTIALLY_REFUNDED';

    const payload: RefundPayload = {
      refund: refundView(order, refund),
      order: { id: gid('Order', order.id), displayFinancialStatus: order.displayFinancialStatus },
      userErrors: [],
    };
    if (key !== undefined) this.byKey.set(key, { digest, payload, usedAt: now });
    return payload;
  }

  /** Keys are only ever added in use order, so the expired ones are at the front: stop at the first kept one. */
  private forgetKeysUsedBefore(cutoff: number): void {
    for (const [key, entry] of this.byKey) {
      if (entry.usedAt > cutoff) return;
      this.byKey.delete(key);
    }
  }
}
