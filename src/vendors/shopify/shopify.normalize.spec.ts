import { describe, expect, it } from 'vitest';
import { normalizeRefund } from './shopify.normalize.js';

const refund = (statuses: string[]) => ({
  id: 'gid://shopify/Refund/1',
  totalRefundedSet: { shopMoney: { amount: statuses.length ? '2.00' : '0.00', currencyCode: 'USD' } },
  transactions: { nodes: statuses.map((status, i) => ({ id: `gid://shopify/OrderTransaction/${i}`, status })) },
});

describe('normalizeRefund: a refund record is not proof money moved (VENDORS.md §1.8, §1.9 point 7)', () => {
  it('success only when every refund transaction is SUCCESS', () => {
    expect(normalizeRefund('1', refund(['SUCCESS'])).status).toBe('success');
    expect(normalizeRefund('1', refund(['SUCCESS', 'SUCCESS'])).status).toBe('success');
  });

  it('no transaction at all → pending (accepted, not proven), never success', () => {
    expect(normalizeRefund('1', refund([])).status).toBe('pending');
    expect(normalizeRefund('1', { id: 'gid://shopify/Refund/1' }).status).toBe('pending');
  });

  it('a transaction not yet settled → pending; a failed one → failed', () => {
    expect(normalizeRefund('1', refund(['SUCCESS', 'AWAITING_RESPONSE'])).status).toBe('pending');
    expect(normalizeRefund('1', refund(['PENDING'])).status).toBe('pending');
    expect(normalizeRefund('1', refund(['SUCCESS', 'FAILURE'])).status).toBe('failed');
  });

  it('a transaction in ERROR → error, not failed: Shopify does not say the money did not move (and it outweighs a FAILURE beside it)', () => {
    expect(normalizeRefund('1', refund(['ERROR'])).status).toBe('error');
    expect(normalizeRefund('1', refund(['SUCCESS', 'ERROR'])).status).toBe('error');
    expect(normalizeRefund('1', refund(['FAILURE', 'ERROR'])).status).toBe('error');
    expect(normalizeRefund('1', refund(['FAILURE'])).status).toBe('failed');
  });
});
