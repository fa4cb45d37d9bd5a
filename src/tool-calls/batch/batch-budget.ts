import { renderForModel } from '../../executor/result-budget.js';
import type { ToolCallBody } from '../tool-call-body.js';

const bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

/**
 * Only a succeeded call whose full result is in the body can be cut: the note
 * points at GET /v1/tool-calls/:id/result, which must then have more to give.
 * Messages (failures, approvals) are short and say everything already.
 */
function truncatable(b: ToolCallBody): boolean {
  return b.status === 'succeeded' && !b.truncated && b.result !== null;
}

/**
 * The batch-wide budget over every result's model-facing `toolResult.content`
 * (truncated ones included; `null` entries, problem+json items, count 0).
 * While the total is over budget, the largest content not yet truncated is cut
 * (same note as the per-result budget) to whichever is larger: the size that
 * brings the total within budget, or its fair share of what the untouched
 * entries leave. Water-filling: a few big results are cut, small ones survive.
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
    const rendered = renderForModel(body.toolResult.content, target, body.toolCallId);
    const newSize = bytes(rendered.content);
    // A content smaller than the note would only grow: leave it whole.
    if (!rendered.truncated || newSize >= sizes[pick]) continue;
    out[pick] = { ...body, result: null, truncated: true, toolResult: { ...body.toolResult, content: rendered.content } };
    total += newSize - sizes[pick];
    sizes[pick] = newSize;
  }
  return out;
}
