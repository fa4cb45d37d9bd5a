import { describe, expect, it } from 'vitest';
import { ERROR_STATUS, type ErrorCode } from '../../common/errors/error-codes.js';
import { mayRunOnResend } from './batch-order.js';

describe('mayRunOnResend', () => {
  it('holds the writes after a write refused for a while or with an unknown fate', () => {
    for (const code of ['CONCURRENCY_LIMIT', 'RATE_LIMITED', 'DATABASE_UNAVAILABLE', 'CONFLICT', 'GATEWAY_STOPPING', 'IDEMPOTENCY_IN_PROGRESS', 'INTERNAL'] as const) {
      expect(mayRunOnResend(code), code).toBe(true);
    }
  });

  it('holds nothing after a write refused for good: a resend refuses it again, nothing can overtake it', () => {
    for (const code of ['RUN_NOT_ACTIVE', 'IDEMPOTENCY_KEY_REUSED', 'BAD_REQUEST', 'VALIDATION_FAILED', 'UNAUTHENTICATED', 'POLICY_BLOCKED', 'NOT_IN_MANIFEST', 'INVALID_INPUT'] as const) {
      expect(mayRunOnResend(code), code).toBe(false);
    }
  });

  it('every 429 and 5xx code may run on a resend', () => {
    const retryable = (Object.keys(ERROR_STATUS) as ErrorCode[]).filter((c) => ERROR_STATUS[c] === 429 || ERROR_STATUS[c] >= 500);
    expect(retryable.filter((c) => !mayRunOnResend(c))).toEqual([]);
  });
});
