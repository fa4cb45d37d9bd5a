import { AppError } from '../../common/errors/app-error.js';
import { holdsCredentialShape } from '../../redaction/credential-shape.js';
import { unknownFieldName } from '../tool-use.js';

/** Most tool_uses in one batch (API.md §9). */
export const MAX_BATCH_SIZE = 32;

/**
 * The rate-limit tokens a batch spends: one per tool_use, as if each were posted alone (a batch of 32 is 32 calls
 * to the vendors; RateLimiter.take lets one above the burst through a full bucket and keeps the rest as debt). A
 * body that is not a batch (refused 400 later) spends one, and more than MAX_BATCH_SIZE items (refused too) no more
 * than that.
 */
export function batchRateCost(req: { body?: unknown }): number {
  const toolUses = (req.body as { toolUses?: unknown } | null | undefined)?.toolUses;
  return Array.isArray(toolUses) ? Math.min(Math.max(toolUses.length, 1), MAX_BATCH_SIZE) : 1;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The batch envelope `{toolUses: [...]}`. Each item is left as sent: it is
 * parsed by the single-call pipeline, so a malformed one becomes that item's
 * own 400 entry instead of failing its neighbours. What is checked here is what
 * the whole batch depends on: the envelope, the size limit, and unique tool_use
 * ids (they are the items' idempotency keys, so a duplicate would silently
 * turn into a replay of its twin).
 */
export function parseBatchRequest(body: unknown, idempotencyHeader: unknown): unknown[] {
  if (idempotencyHeader !== undefined) {
    throw new AppError(
      'BAD_REQUEST',
      'Idempotency-Key is not supported on batches: each tool_use is keyed by its own id (run id + tool_use id); re-post the batch to replay it',
    );
  }
  if (!isPlainObject(body)) throw new AppError('VALIDATION_FAILED', 'body must be {"toolUses": [tool_use, ...]}');
  const extra = Object.keys(body).filter((k) => k !== 'toolUses');
  if (extra.length) throw new AppError('VALIDATION_FAILED', `unknown field: ${unknownFieldName(extra)}`);
  const toolUses = body.toolUses;
  if (!Array.isArray(toolUses)) throw new AppError('VALIDATION_FAILED', 'toolUses: must be an array of tool_use blocks');
  if (toolUses.length === 0 || toolUses.length > MAX_BATCH_SIZE) {
    throw new AppError('VALIDATION_FAILED', `toolUses: must hold 1 to ${MAX_BATCH_SIZE} tool_use blocks, got ${toolUses.length}`);
  }
  const seen = new Set<string>();
  for (const item of toolUses) {
    const id = isPlainObject(item) && typeof item.id === 'string' ? item.id : undefined;
    if (id === undefined) continue;
    if (seen.has(id)) {
      // Named back only when it holds no credential (a token pasted as an id is refused by itself, never repeated).
      const named = holdsCredentialShape(id) ? 'a tool_use id (not repeated: it has the shape of a credential)' : `tool_use id ${JSON.stringify(id.slice(0, 64))}`;
      throw new AppError('VALIDATION_FAILED', `toolUses: ${named} appears more than once`);
    }
    seen.add(id);
  }
  return toolUses;
}

/** A write (or an unknown tool, or an unparseable item: 'alone') runs alone; consecutive reads together. */
export type ScheduleKind = 'read' | 'write' | 'alone';

/**
 * Groups in execution order: consecutive reads share a group (run
 * concurrently), anything else is a group of its own (run alone). Groups run
 * one after the other, so a write never overlaps anything and sees every
 * earlier read finished.
 */
export function scheduleBatch(kinds: readonly ScheduleKind[]): number[][] {
  const groups: number[][] = [];
  let reads: number[] | null = null;
  kinds.forEach((kind, i) => {
    if (kind === 'read') {
      if (!reads) groups.push((reads = []));
      reads.push(i);
    } else {
      reads = null;
      groups.push([i]);
    }
  });
  return groups;
}

/** Runs `task` for every index with at most `limit` in flight; `task` must not reject. */
export async function runBounded(indexes: readonly number[], limit: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < indexes.length) await task(indexes[next++]);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, indexes.length)) }, worker));
}
