import { describe, expect, it } from 'vitest';
import { AppError } from '../../common/errors/app-error.js';
import { MAX_BATCH_SIZE, parseBatchRequest, runBounded, scheduleBatch } from './batch-request.js';

const use = (id: string) => ({ type: 'tool_use', id, name: 'order_lookup', input: { action: 'lookup', orderId: '1' } });
const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (e) {
    return e instanceof AppError ? e.code : 'not an AppError';
  }
};

describe('batch request', () => {
  it('accepts 1 to 32 tool_uses and leaves each item as sent', () => {
    const items = [use('a'), { type: 'text' }, 'junk', use('b')];
    expect(parseBatchRequest({ toolUses: items }, undefined)).toBe(items);
    expect(parseBatchRequest({ toolUses: Array.from({ length: MAX_BATCH_SIZE }, (_, i) => use(`t${i}`)) }, undefined)).toHaveLength(32);
  });

  it('refuses a bad envelope, the size limit and duplicate ids with 400 VALIDATION_FAILED', () => {
    for (const body of [
      undefined, [], 'x', {}, { toolUses: {} }, { toolUses: 'a' }, { toolUses: [] }, { toolUses: [use('a')], extra: 1 },
      { toolUses: Array.from({ length: MAX_BATCH_SIZE + 1 }, (_, i) => use(`t${i}`)) }, { toolUses: [use('a'), use('b'), use('a')] },
    ]) {
      expect(codeOf(() => parseBatchRequest(body, undefined)), JSON.stringify(body)?.slice(0, 80)).toBe('VALIDATION_FAILED');
    }
  });

  it('refuses a batch-level Idempotency-Key, saying how items are keyed', () => {
    expect(codeOf(() => parseBatchRequest({ toolUses: [use('a')] }, 'k-1'))).toBe('BAD_REQUEST');
    expect(() => parseBatchRequest({ toolUses: [use('a')] }, 'k-1')).toThrow(/tool_use id/);
  });

  it('groups consecutive reads; everything else runs alone, in order', () => {
    expect(scheduleBatch(['read', 'read', 'alone', 'read'])).toEqual([[0, 1], [2], [3]]);
    expect(scheduleBatch(['alone', 'alone', 'read', 'read', 'read', 'alone'])).toEqual([[0], [1], [2, 3, 4], [5]]);
    expect(scheduleBatch([])).toEqual([]);
  });

  it('runs every index with at most `limit` in flight', async () => {
    let inFlight = 0;
    let peak = 0;
    const done: number[] = [];
    await runBounded([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 3, async (i) => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      await new Promise((r) => setTimeout(r, 5 + (i % 3)));
      inFlight--;
      done.push(i);
    });
    expect(peak).toBe(3);
    expect(done.sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });
});
