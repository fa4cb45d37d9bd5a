import { jsonPrefix, renderForModel, truncationNote } from '../../executor/result-budget.js';
import type { ToolCallBody } from '../tool-call-body.js';

const bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

const NOTE_START = '\n[truncated: the result is ';

/**
 * A content the per-result budget already cut: the JSON prefix it shows and the
 * size of the whole result, read back from its note. Null when the content does
 * not end with exactly the note renderForModel writes for this call.
 */
function alreadyCut(b: ToolCallBody): { shown: string; fullBytes: number } | null {
  const content = b.toolResult.content;
  const at = content.lastIndexOf(NOTE_START);
  if (at < 0) return null;
  const fullBytes = Number(/^\d+/.exec(content.slice(at + NOTE_START.length))?.[0] ?? NaN);
  if (!Number.isSafeInteger(fullBytes)) return null;
  const shown = content.slice(0, at);
  return content.slice(at) === truncationNote(fullBytes, bytes(shown), b.toolCallId) ? { shown, fullBytes } : null;
}

/**
 * Only a succeeded call whose result is in the body, whole or cut by the
 * per-result budget, can be cut: the note points at
 * GET /v1/tool-calls/:id/result, which must then have more to give. Messages
 * (failures, approvals) are short and say everything already.
 */
function truncatable(b: ToolCallBody): boolean {
  if (b.status !== 'succeeded') return false;
  return b.truncated ? alreadyCut(b) !== null : b.result !== null;
}

/**
 * The content cut to about `budgetBytes`, with the note. A content already cut
 * by the per-result budget is cut further from its shown prefix; its note keeps
 * the size of the whole result.
 */
function cut(b: ToolCallBody, budgetBytes: number): string | null {
  if (!b.truncated) {
    const rendered = renderForModel(b.toolResult.content, budgetBytes, b.toolCallId);
    return rendered.truncated ? rendered.content : null;
  }
  const parts = alreadyCut(b)!;
  const noteBytes = bytes(truncationNote(parts.fullBytes, parts.fullBytes, b.toolCallId));
  const shown = jsonPrefix(parts.shown, Math.max(0, budgetBytes - noteBytes));
  return shown + truncationNote(parts.fullBytes, bytes(shown), b.toolCallId);
}

/**
 * The water level for `sizes` sharing `roomBytes`: the largest L with
 * Σ min(size, L) <= roomBytes, so entries at or below L stay whole and every
 * larger one is cut to L (0 when there is no room at all).
 */
function waterLevel(sizes: number[], roomBytes: number): number {
  const sorted = [...sizes].sort((a, b) => a - b);
  let below = 0;
  for (let j = 0; j < sorted.length; j++) {
    const level = (roomBytes - below) / (sorted.length - j);
    if (level <= sorted[j]) return Math.max(0, Math.floor(level));
    below += sorted[j];
  }
  return sorted.length > 0 ? sorted[sorted.length - 1] : 0;
}

/**
 * The batch-wide budget over every result's model-facing `toolResult.content`
 * (truncated ones included; `null` entries, problem+json items, count 0).
 * While the total is over budget, the largest cuttable content (API.md: the
 * largest results first, whether or not the per-result budget already cut it)
 * is cut (same note as the per-result budget, counted in the size) to the
 * water level of the entries not yet cut: the level L at which the others
 * (messages, problems, cut ones) plus every such entry at min(size, L) just
 * fit. Water-filling: the big results end about equal at L, the ones below it
 * stay whole. L is computed again after each cut, so an entry left as it is
 * (shorter than the note) or cut a few bytes under L (a UTF-8 boundary) only
 * leaves more room to the next.
 *
 * The total fits afterwards unless the truncation notes themselves (about
 * 150 bytes each) outgrow the budget; then every candidate is as short as a
 * note allows. Entries are never mutated: changed ones are new objects.
 */
export function fitBatchBudget<T extends ToolCallBody>(bodies: readonly (T | null)[], budgetBytes: number): (T | null)[] {
  const out = [...bodies];
  const sizes = bodies.map((b) => (b ? bytes(b.toolResult.content) : 0));
  let total = sizes.reduce((a, n) => a + n, 0);
  const pending = new Set(bodies.flatMap((b, i) => (b && truncatable(b) ? [i] : [])));

  while (total > budgetBytes && pending.size > 0) {
    let pick = -1;
    let pendingBytes = 0;
    for (const i of pending) {
      pendingBytes += sizes[i];
      if (pick < 0 || sizes[i] > sizes[pick]) pick = i;
    }
    // Over budget, the largest pending entry is above the level (were it not, every pending one would fit at
    // min(size, L) = size): cut it to L, which brings the total within budget once every entry above L is cut.
    const target = waterLevel([...pending].map((i) => sizes[i]), budgetBytes - (total - pendingBytes));
    pending.delete(pick);

    const body = out[pick]!;
    const content = cut(body, target);
    // A content smaller than the note would only grow: leave it as it is.
    if (content === null || bytes(content) >= sizes[pick]) continue;
    const newSize = bytes(content);
    out[pick] = { ...body, result: null, truncated: true, toolResult: { ...body.toolResult, content } };
    total += newSize - sizes[pick];
    sizes[pick] = newSize;
  }
  return out;
}
