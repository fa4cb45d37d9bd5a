import { describe, expect, it } from 'vitest';
import { IN_PROGRESS_MESSAGE, KEY_MISMATCH_MESSAGE } from '../../emulator/shopify.refund-desk.js';
import { refundUserErrorOutcome } from './shopify.refund.js';

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
