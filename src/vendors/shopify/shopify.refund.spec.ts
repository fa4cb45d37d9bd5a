import { describe, expect, it } from 'vitest';
import { IN_PROGRESS_MESSAGE, KEY_MISMATCH_MESSAGE } from '../../emulator/shopify.refund-desk.js';
import { buildRefundInput, currencyDecimals, defusedMarkers, formatAmount, pickRefundParent, refundAmountProblem, refundUserErrorOutcome } from './shopify.refund.js';

const err = (message: string) => [{ field: null, message }];

describe('refundUserErrorOutcome: answers that prove an earlier attempt under the key reached Shopify (VENDORS.md §1.9)', () => {
  it('"currently in progress" → in_progress (an answer: sent; polled after a short wait), not rate_limited', () => {
    expect(refundUserErrorOutcome(err(IN_PROGRESS_MESSAGE))).toMatchObject({ ok: false, kind: 'in_progress', vendorStatus: 200, requestSent: true, retryAfterMs: 1_000 });
  });

  it('"same idempotency key ... different operation parameters" → key_conflict, not a plain rejection like validation errors', () => {
    expect(refundUserErrorOutcome(err(KEY_MISMATCH_MESSAGE))).toMatchObject({ ok: false, kind: 'key_conflict', vendorStatus: 200, requestSent: true });
    expect(refundUserErrorOutcome(err('Refund amount 9.00 USD exceeds the maximum refundable amount 1.00 USD'))).toMatchObject({ kind: 'rejected' });
    expect(refundUserErrorOutcome(err('Order does not exist'))).toMatchObject({ kind: 'not_found' });
    expect(refundUserErrorOutcome(err('Gateway does not match the parent transaction'))).toMatchObject({ kind: 'rejected' });
  });
});

describe('refundUserErrorOutcome: "does not exist" is "order not found" only when it is about the order', () => {
  it('field ["orderId"], or no field and a message about the order → not_found', () => {
    expect(refundUserErrorOutcome([{ field: ['orderId'], message: 'Order does not exist' }])).toMatchObject({ kind: 'not_found', message: 'shopify order not found' });
    expect(refundUserErrorOutcome([{ field: null, message: 'Order not found' }])).toMatchObject({ kind: 'not_found' });
  });

  it('another missing object (the parent transaction, a line item) is a refusal that names the field, not "order not found"', () => {
    const parent = refundUserErrorOutcome([{ field: ['transactions', '0', 'parentId'], message: 'Parent transaction does not exist' }]);
    expect(parent).toMatchObject({ kind: 'rejected', vendorStatus: 200, requestSent: true, message: 'shopify refused the refund: something it refers to does not exist (transactions.0.parentId)' });
    expect(refundUserErrorOutcome([{ field: null, message: 'Parent transaction does not exist' }])).toMatchObject({ kind: 'rejected' });
    expect(refundUserErrorOutcome([{ field: ['refundLineItems', '0', 'lineItemId'], message: 'Line item does not exist' }])).toMatchObject({ kind: 'rejected' });
    // A field that is not plain schema names is not echoed.
    expect(refundUserErrorOutcome([{ field: ['x y'], message: 'Thing does not exist' }]).message).toBe('shopify refused the refund: something it refers to does not exist');
  });
});

describe('pickRefundParent: which payment a refund goes back to (split tender)', () => {
  const tx = (id: number, gateway: string, amount: string, kind = 'SALE', status = 'SUCCESS') => ({
    id: `gid://shopify/OrderTransaction/${id}`,
    kind,
    status,
    gateway,
    amountSet: { shopMoney: { amount, currencyCode: 'USD' }, presentmentMoney: { amount, currencyCode: 'USD' } },
  });
  const giftThenCard = { transactions: [tx(1, 'gift_card', '10.00'), tx(2, 'shopify_payments', '35.00')] };

  it('prefers a payment other than a gift card, even when the gift card was booked first', () => {
    expect(pickRefundParent(giftThenCard, '20.00')).toEqual({ id: 'gid://shopify/OrderTransaction/2', gateway: 'shopify_payments' });
    expect(pickRefundParent(giftThenCard, '5')).toEqual({ id: 'gid://shopify/OrderTransaction/2', gateway: 'shopify_payments' });
  });

  it('then the first payment whose amount covers the refund; none covers → the first preferred one (Shopify states the ceiling)', () => {
    const twoCards = { transactions: [tx(1, 'shopify_payments', '10.00'), tx(2, 'paypal', '35.00'), tx(3, 'gift_card', '50.00')] };
    expect(pickRefundParent(twoCards, '10.00')?.id).toBe('gid://shopify/OrderTransaction/1');
    expect(pickRefundParent(twoCards, '20.00')?.id).toBe('gid://shopify/OrderTransaction/2');
    expect(pickRefundParent(twoCards, '45.00')?.id).toBe('gid://shopify/OrderTransaction/3');
    expect(pickRefundParent(twoCards, '99.00')?.id).toBe('gid://shopify/OrderTransaction/1');
  });

  it('reads the amount the customer paid in (presentment), and ignores what is no payment', () => {
    const eur = {
      transactions: [
        tx(9, 'shopify_payments', '80.00', 'AUTHORIZATION'),
        tx(8, 'shopify_payments', '80.00', 'SALE', 'FAILURE'),
        { ...tx(1, 'gift_card', '10.00'), amountSet: { shopMoney: { amount: '10.80', currencyCode: 'USD' }, presentmentMoney: { amount: '10.00', currencyCode: 'EUR' } } },
        { ...tx(2, 'shopify_payments', '40.00'), amountSet: { shopMoney: { amount: '43.20', currencyCode: 'USD' }, presentmentMoney: { amount: '40.00', currencyCode: 'EUR' } } },
      ],
    };
    expect(pickRefundParent(eur, '40.00')?.id).toBe('gid://shopify/OrderTransaction/2');
    expect(pickRefundParent({ transactions: [tx(9, 'x', '1.00', 'AUTHORIZATION')] }, '1.00')).toBeUndefined();
  });

  it('what is still refundable on a payment decides first (maximumRefundableV2): after 30.00 of the 35.00 card went back, 10.00 goes to the 10.00 gift card', () => {
    const left = (t: ReturnType<typeof tx>, amount: string, currencyCode = 'USD') => ({ ...t, maximumRefundableV2: { amount, currencyCode } });
    const [gift, card] = giftThenCard.transactions;
    const after30 = { transactions: [left(gift!, '10.00'), left(card!, '5.00')] };
    expect(pickRefundParent(after30, '10.00', 'USD')).toEqual({ id: 'gid://shopify/OrderTransaction/1', gateway: 'gift_card' });
    // the card is still preferred for what it can take
    expect(pickRefundParent(after30, '5.00', 'USD')).toEqual({ id: 'gid://shopify/OrderTransaction/2', gateway: 'shopify_payments' });
    // no payment can take it: as before, by the amounts taken (Shopify then says how much is refundable)
    expect(pickRefundParent(after30, '12.00', 'USD')?.id).toBe('gid://shopify/OrderTransaction/2');
    // a figure in another currency than the refund's is no ceiling for it: the amounts taken decide
    const inShopMoney = { transactions: [left(gift!, '10.80', 'USD'), left(card!, '5.40', 'USD')] };
    expect(pickRefundParent(inShopMoney, '10.00', 'EUR')?.id).toBe('gid://shopify/OrderTransaction/2');
  });

  it('Shopify did not say what is still refundable: the amounts the payments took decide, whatever was refunded since', () => {
    const later = { transactions: [...giftThenCard.transactions, { id: 'gid://shopify/OrderTransaction/3', kind: 'REFUND', status: 'SUCCESS', gateway: 'shopify_payments', amountSet: { presentmentMoney: { amount: '20.00' } } }] };
    expect(pickRefundParent(later, '20.00')).toEqual(pickRefundParent(giftThenCard, '20.00'));
    const cards = [tx(1, 'shopify_payments', '10.00'), tx(2, 'paypal', '35.00')];
    const refunded = { transactions: [...cards, { ...tx(3, 'shopify_payments', '5.00', 'REFUND'), parentId: 'gid://shopify/OrderTransaction/1' }] };
    expect(pickRefundParent({ transactions: cards }, '10.00')?.id).toBe('gid://shopify/OrderTransaction/1');
    expect(pickRefundParent(refunded, '10.00')?.id).toBe('gid://shopify/OrderTransaction/1');
  });
});

describe('refund amounts in the decimals of their currency (ISO 4217 minor unit)', () => {
  it('currencyDecimals: 0 for JPY and its like, 3 for KWD and its like, 2 for the others and for an unknown or unsaid currency', () => {
    for (const c of ['JPY', 'KRW', 'VND', 'CLP', 'ISK', 'UGX', 'XAF', 'XOF', 'XPF', 'PYG', 'RWF', 'KMF', 'GNF', 'DJF', 'BIF', 'VUV']) expect(currencyDecimals(c), c).toBe(0);
    for (const c of ['BHD', 'IQD', 'JOD', 'KWD', 'LYD', 'OMR', 'TND']) expect(currencyDecimals(c), c).toBe(3);
    for (const c of ['USD', 'EUR', 'GBP', 'ZZZ', undefined]) expect(currencyDecimals(c), String(c)).toBe(2);
  });

  it('formatAmount writes exactly the currency\'s decimals: one spelling per amount', () => {
    expect(formatAmount('12.5', 3)).toBe('12.500');
    expect(formatAmount('12.345', 3)).toBe('12.345');
    expect(formatAmount('12', 3)).toBe('12.000');
    expect(formatAmount('100', 0)).toBe('100');
    expect(formatAmount('100.00', 0)).toBe('100');
    expect(formatAmount('0100.0', 0)).toBe('100');
    expect(formatAmount('12.5', 2)).toBe('12.50');
    expect(formatAmount('12.340', 2)).toBe('12.34');
    expect(formatAmount('0100', 2)).toBe('100.00');
    expect(formatAmount('0.05', 2)).toBe('0.05');
  });

  it('formatAmount never rounds: a digit beyond the decimals is a bug of the caller, not a smaller refund', () => {
    expect(() => formatAmount('100.5', 0)).toThrow();
    expect(() => formatAmount('12.345', 2)).toThrow();
  });

  it('refundAmountProblem: a digit other than 0 beyond the minor unit, naming the currency and its decimals', () => {
    expect(refundAmountProblem('100.5', 'JPY')).toBe('JPY has no decimals: the refund amount "100.5" must be a whole number');
    expect(refundAmountProblem('12.345', 'USD')).toBe('USD has 2 decimals: the refund amount "12.345" has more');
    expect(refundAmountProblem('12.345', undefined)).toMatch(/2 decimals/);
    for (const [amount, currency] of [['100.00', 'JPY'], ['100', 'JPY'], ['12.340', 'USD'], ['12.345', 'KWD'], ['12.5', 'KWD'], ['12.34', undefined]] as const) {
      expect(refundAmountProblem(amount, currency), `${amount} ${currency}`).toBeNull();
    }
  });

  it('pickRefundParent compares 3-decimal amounts exactly', () => {
    const kwd = (id: number, amount: string) => ({
      id: `gid://shopify/OrderTransaction/${id}`,
      kind: 'SALE',
      status: 'SUCCESS',
      gateway: id === 1 ? 'shopify_payments' : 'paypal',
      amountSet: { presentmentMoney: { amount, currencyCode: 'KWD' } },
    });
    const order = { transactions: [kwd(1, '12.345'), kwd(2, '50.000')] };
    expect(pickRefundParent(order, '12.345')?.id).toBe('gid://shopify/OrderTransaction/1');
    expect(pickRefundParent(order, '12.346')?.id).toBe('gid://shopify/OrderTransaction/2');
  });
});

describe('the refund note names only its own call (a read-back reconcile goes by the marker)', () => {
  const parent = { id: 'gid://shopify/OrderTransaction/1', gateway: 'shopify_payments' };
  const named = (note: string): string[] => [...note.matchAll(/\[tool-gateway call ([0-9a-f-]{36})\]/g)].map((m) => m[1]);
  it('a marker written into the model\'s note is made inert; the gateway\'s own is appended last', () => {
    const own = '0f3c6b1e-1111-4222-8333-444455556666';
    const other = '11111111-2222-4333-8444-555555555555';
    const lookAlikes = [`[\u200btool-gateway call ${other}]`, `[tool\u2011gateway call ${other}]`, `[tool-gate\u00adway call ${other}]`, `\uff3btool-gateway call ${other}]`, `[tool\u2060-gateway call ${other}]`];
    for (const note of [`goodwill [tool-gateway call ${other}]`, `x [ TOOL-GATEWAY  CALL ${other}]`, `[tool-gateway call ${other}] first`, ...lookAlikes]) {
      const input = buildRefundInput('gid://shopify/Order/1', '1.00', note, own, parent, undefined);
      expect(named(input.note as string)).toEqual([own]);
      // read as a person reads it, only the last marker opens with a bracket
      expect((input.note as string).normalize('NFKC').split('[').length - 1, note).toBe(1);
      expect((input.note as string).endsWith(`[tool-gateway call ${own}]`)).toBe(true);
    }
    expect(defusedMarkers('a [note] stays')).toBe('a [note] stays');
  });
});
