import { renderForModel, truncationNote, utf8Prefix } from '../../executor/result-budget.js';
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
  const shown = utf8Prefix(parts.shown, Math.max(0, budgetBytes - noteBytes));
  return shown + truncationNote(parts.fullBytes, bytes(shown), b.toolCallId);
}

/**
 * The batch-wide budget over every result's model-facing `toolResult.content`
 * (truncated ones included; `null` entries, problem+json items, count 0).
 * While the total is over budget, the largest cuttable content (API.md: the
 * largest results first, whether or not the per-result budget already cut it)
 * is cut (same note as the per-result budget) to whichever is larger: the size
 * that brings the total within budget, or its fair share of what the
 * not-yet-cut entries leave. Water-filling: a few big results are cut, small
 * ones survive.
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
    pending.delete(pick);
    const fixedBytes = total - pendingBytes;
    const fairShare = Math.floor((budgetBytes - fixedBytes) / (pending.size + 1));
    const needed = budgetBytes - (total - sizes[pick]);
    const target = Math.max(needed, fairShare, 0);

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
