import { describe, expect, it } from 'vitest';
import { AppError } from '../../common/errors/app-error.js';
import { ERROR_STATUS, type ErrorCode } from '../../common/errors/error-codes.js';
import { problemBody } from '../../common/errors/problem.filter.js';
import { TOOL_CALL_STATUSES } from '../tool-call-status.js';
import { keyReusedHold, mayRunOnResend } from './batch-order.js';

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

describe('keyReusedHold', () => {
  const reused = (storedStatus?: string) =>
    Object.assign(new AppError('IDEMPOTENCY_KEY_REUSED', 'this Idempotency-Key was already used for a different action'), storedStatus ? { storedStatus } : {});

  it('holds as the call first stored under the id would: behind an approval, or while it is still to run or running', () => {
    const holds = Object.fromEntries(TOOL_CALL_STATUSES.map((s) => [s, keyReusedHold(reused(s))]));
    expect(holds).toEqual({
      requested: 'executing',
      blocked: null,
      waiting_approval: 'approval',
      approved: 'executing',
      running: 'executing',
      succeeded: null,
      failed: null,
      indeterminate: null,
    });
  });

  it('holds nothing for another code or a 422 without a stored status, and the status never reaches the problem body', () => {
    expect(keyReusedHold(reused())).toBeNull();
    expect(keyReusedHold(Object.assign(new AppError('CONFLICT'), { storedStatus: 'running' }))).toBeNull();
    expect(problemBody(reused('waiting_approval'), 'c')).toEqual(problemBody(reused(), 'c'));
  });
});
