import { describe, expect, it } from 'vitest';
import { AppError } from '../../common/errors/app-error.js';
import { ERROR_STATUS, type ErrorCode } from '../../common/errors/error-codes.js';
import { problemBody } from '../../common/errors/problem.filter.js';
import { TOOL_CALL_STATUSES } from '../tool-call-status.js';
import { keyReusedHold, mayRunOnResend, reusedKeyStoredCall } from './batch-order.js';
import type { ScheduleKind } from './batch-request.js';

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
  type Stored = { status?: unknown; toolName?: unknown; action?: unknown };
  const reused = (storedCall?: Stored) =>
    Object.assign(new AppError('IDEMPOTENCY_KEY_REUSED', 'this Idempotency-Key was already used for a different action'), storedCall ? { storedCall } : {});
  const write = (status: string): Stored => ({ status, toolName: 'shopify_refund', action: 'create' });
  // As the batch's rule from the catalog: by the action's side effect, anything unknown alone.
  const kinds: Record<string, ScheduleKind> = { 'shopify_refund.create': 'write', 'shopify_order.add_note': 'write', 'order_lookup.lookup': 'read' };
  const kindOf = (toolName: string, action: string): ScheduleKind => kinds[`${toolName}.${action}`] ?? 'alone';

  it('holds as the write first stored under the id would: behind an approval, or while it is still to run or running', () => {
    const holds = Object.fromEntries(TOOL_CALL_STATUSES.map((s) => [s, keyReusedHold(reused(write(s)), kindOf)]));
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

  it('decides by the stored call, never the resent item: a stored read (or an action not in the catalog) holds nothing whatever its status', () => {
    for (const status of TOOL_CALL_STATUSES) {
      expect(keyReusedHold(reused({ status, toolName: 'order_lookup', action: 'lookup' }), kindOf), status).toBeNull();
      expect(keyReusedHold(reused({ status, toolName: 'shopify_refund', action: 'gone' }), kindOf), status).toBeNull();
    }
    // Only the stored tool and action are asked about.
    const asked: string[] = [];
    keyReusedHold(reused(write('waiting_approval')), (t, a) => (asked.push(`${t}.${a}`), 'write'));
    expect(asked).toEqual(['shopify_refund.create']);
  });

  it('holds nothing for another code, or a 422 without a whole stored call, and the stored call never reaches the problem body', () => {
    expect(keyReusedHold(reused(), kindOf)).toBeNull();
    expect(keyReusedHold(reused({ status: 'waiting_approval' }), kindOf)).toBeNull();
    expect(keyReusedHold(reused({ status: 'waiting_approval', toolName: 'shopify_refund' }), kindOf)).toBeNull();
    expect(keyReusedHold(reused({ ...write('running'), status: 7 }), kindOf)).toBeNull();
    expect(keyReusedHold(Object.assign(new AppError('CONFLICT'), { storedCall: write('running') }), kindOf)).toBeNull();
    expect(problemBody(reused(write('waiting_approval')), 'c')).toEqual(problemBody(reused(), 'c'));
  });
});

describe('reusedKeyStoredCall', () => {
  it('reads the stored call off a 422 IDEMPOTENCY_KEY_REUSED only', () => {
    const storedCall = { status: 'running', toolName: 'shopify_order', action: 'add_note' };
    expect(reusedKeyStoredCall(Object.assign(new AppError('IDEMPOTENCY_KEY_REUSED'), { storedCall }))).toEqual(storedCall);
    expect(reusedKeyStoredCall(Object.assign(new AppError('CONFLICT'), { storedCall }))).toBeNull();
    expect(reusedKeyStoredCall(new AppError('IDEMPOTENCY_KEY_REUSED'))).toBeNull();
  });
});
