import { describe, expect, it } from 'vitest';
import { AppError } from '../../common/errors/app-error.js';
import type { ToolCallBody } from '../tool-call-body.js';
import type { ScheduleKind } from './batch-request.js';
import { endedRunOnly, revokedKeyOnly, writeHoldOf } from './tool-call-batch.service.js';

describe('writeHoldOf', () => {
  const kinds: Record<string, ScheduleKind> = { 'shopify_refund.create': 'write', 'order_lookup.lookup': 'read' };
  const kindOf = (toolName: string, action: string): ScheduleKind => kinds[`${toolName}.${action}`] ?? 'alone';
  const reused = (status: string, toolName: string, action: string) =>
    Object.assign(new AppError('IDEMPOTENCY_KEY_REUSED', 'this Idempotency-Key was already used for a different action'), { storedCall: { status, toolName, action } });
  const holdOf = (kind: ScheduleKind, refusal: AppError | null, body: ToolCallBody | null = null) => writeHoldOf([0], [kind], [body], [refusal], kindOf)?.();

  it('an item refused 422 IDEMPOTENCY_KEY_REUSED under the id of a write not run holds the writes after it, whatever it was resent as', () => {
    for (const kind of ['read', 'write', 'alone'] as const) {
      const hold = holdOf(kind, reused('waiting_approval', 'shopify_refund', 'create'));
      expect(hold?.code, kind).toBe('IDEMPOTENCY_IN_PROGRESS');
      expect(hold?.detail, kind).toMatch(/toolUses\[0\].*IDEMPOTENCY_KEY_REUSED.*waiting for approval/);
      expect(holdOf(kind, reused('running', 'shopify_refund', 'create'))?.detail, kind).toMatch(/has not finished/);
    }
  });

  it('under the id of a read, or of a write that has settled, it holds nothing, even resent as a write', () => {
    for (const kind of ['read', 'write'] as const) {
      expect(holdOf(kind, reused('running', 'order_lookup', 'lookup')), kind).toBeUndefined();
      expect(holdOf(kind, reused('succeeded', 'shopify_refund', 'create')), kind).toBeUndefined();
    }
  });

  it('other answers are judged by the item itself: only a write holds', () => {
    const waiting = { status: 'waiting_approval' } as ToolCallBody;
    expect(holdOf('write', null, waiting)?.code).toBe('IDEMPOTENCY_IN_PROGRESS');
    expect(holdOf('read', null, waiting)).toBeUndefined();
    expect(holdOf('write', new AppError('RATE_LIMITED'))?.detail).toMatch(/RATE_LIMITED/);
    expect(holdOf('read', new AppError('RATE_LIMITED'))).toBeUndefined();
    expect(holdOf('write', new AppError('POLICY_BLOCKED'))).toBeUndefined();
  });

  it('a write held behind one awaiting approval names it (its index and tool call), and every hold says it holds only within the batch', () => {
    const waiting = { status: 'waiting_approval', toolCallId: '0b9f6a1e-0000-4000-8000-000000000001' } as ToolCallBody;
    const hold = writeHoldOf([0, 1], ['read', 'write'], [null, waiting], [null, null], kindOf)?.();
    expect(hold?.detail).toMatch(/toolUses\[1\], tool call 0b9f6a1e-0000-4000-8000-000000000001\) is waiting for approval/);
    for (const held of [hold, holdOf('write', new AppError('RATE_LIMITED')), holdOf('write', reused('running', 'shopify_refund', 'create'))]) {
      expect(held?.detail).toContain('sent again without that write before it, it is a new call and runs at once');
    }
  });
});

describe('endedRunOnly', () => {
  const ended = new AppError('RUN_NOT_ACTIVE');
  const malformed = new AppError('BAD_REQUEST', 'type must be "tool_use"');

  it('refused RUN_NOT_ACTIVE, with or without items that are no tool_use at all: one 409 for the batch', () => {
    expect(endedRunOnly([null, null], [ended, ended])).toBe(true);
    expect(endedRunOnly([null, null, null], [malformed, ended, malformed])).toBe(true);
  });

  it('an item answered from the ledger (a call the run made), another refusal, or no RUN_NOT_ACTIVE at all: per-item answers', () => {
    expect(endedRunOnly([null, { status: 'succeeded' } as ToolCallBody], [malformed, null])).toBe(false);
    expect(endedRunOnly([null, null], [ended, new AppError('IDEMPOTENCY_KEY_REUSED')])).toBe(false);
    expect(endedRunOnly([null, null], [ended, new AppError('DATABASE_UNAVAILABLE')])).toBe(false);
    expect(endedRunOnly([null, null], [malformed, malformed])).toBe(false);
  });
});

describe('revokedKeyOnly', () => {
  const revoked = new AppError('UNAUTHENTICATED');
  const malformed = new AppError('BAD_REQUEST', 'type must be "tool_use"');

  it('refused UNAUTHENTICATED before anything ran, with or without items that are no tool_use at all: one 401 for the batch', () => {
    expect(revokedKeyOnly([null, null], [revoked, revoked])).toBe(true);
    expect(revokedKeyOnly([null, null, null], [malformed, revoked, malformed])).toBe(true);
  });

  it('revoked midway (an item ran or was replayed), another refusal, or no 401 at all: per-item answers', () => {
    expect(revokedKeyOnly([{ status: 'succeeded' } as ToolCallBody, null], [null, revoked])).toBe(false);
    expect(revokedKeyOnly([null, null], [revoked, new AppError('CONCURRENCY_LIMIT')])).toBe(false);
    expect(revokedKeyOnly([null, null], [revoked, new AppError('RUN_NOT_ACTIVE')])).toBe(false);
    expect(revokedKeyOnly([null, null], [malformed, malformed])).toBe(false);
  });
});
