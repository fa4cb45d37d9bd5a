import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ToolCallBody } from '../tool-call-body.js';
import { fitBatchBudget } from './batch-budget.js';

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');
const total = (bodies: (ToolCallBody | null)[]) => bodies.reduce((n, b) => n + (b ? bytes(b.toolResult.content) : 0), 0);

let seq = 0;
function succeeded(value: unknown, over: Partial<ToolCallBody> = {}): ToolCallBody {
  const id = `00000000-0000-4000-8000-${String(++seq).padStart(12, '0')}`;
  return {
    toolCallId: id,
    status: 'succeeded',
    errorCode: null,
    replayed: false,
    result: value,
    truncated: false,
    toolResult: { type: 'tool_result', tool_use_id: `toolu_${seq}`, content: JSON.stringify(value), is_error: false },
    ...over,
  };
}
const sized = (n: number) => succeeded({ text: 'x'.repeat(Math.max(0, n - 11)) }); // {"text":"…"} is 11 bytes of JSON around the text
const alreadyTruncated = (n: number) => {
  const b = sized(n);
  return { ...b, result: null, truncated: true };
};
function failed(): ToolCallBody {
  return { ...succeeded(null), status: 'failed', errorCode: 'VENDOR_ERROR', result: null, toolResult: { type: 'tool_result', tool_use_id: 't', content: 'x'.repeat(300), is_error: true } };
}

describe('batch budget', () => {
  it('leaves a batch within budget untouched', () => {
    const bodies = [sized(1000), null, sized(500)];
    const out = fitBatchBudget(bodies, 2000);
    expect(out).toEqual(bodies);
    out.forEach((b, i) => expect(b).toBe(bodies[i]));
  });

  it('cuts the largest first, and only as much as needed', () => {
    const small = sized(500);
    const mid = sized(1000);
    const big = sized(3000);
    const out = fitBatchBudget([small, big, mid], 3000);
    expect(out[0]).toBe(small);
    expect(out[2]).toBe(mid);
    const cut = out[1]!;
    expect(cut).toMatchObject({ truncated: true, result: null, toolCallId: big.toolCallId, status: 'succeeded' });
    expect(total(out)).toBeLessThanOrEqual(3000);
    // Only what was needed: the cut result uses the room the others leave (within a few bytes of the note's digits).
    expect(bytes(cut.toolResult.content)).toBeGreaterThan(3000 - 1500 - 10);
    expect(cut.toolResult.content).toContain('[truncated: the result is 3000 bytes of JSON');
    expect(cut.toolResult.content).toContain(`The full result is available from GET /v1/tool-calls/${big.toolCallId}/result`);
    expect(big.toolResult.content).toHaveLength(3000); // the input is not mutated
  });

  it('moves on to the next largest when cutting one is not enough', () => {
    const bodies = [sized(4000), sized(3000), sized(200)];
    const out = fitBatchBudget(bodies, 2000);
    expect(out[0]!.truncated).toBe(true);
    expect(out[1]!.truncated).toBe(true);
    expect(out[2]).toBe(bodies[2]);
    expect(total(out)).toBeLessThanOrEqual(2000);
  });

  it('skips results already truncated (they still count) and cuts the next largest', () => {
    const done = alreadyTruncated(2500);
    const next = sized(1500);
    const small = sized(400);
    const out = fitBatchBudget([done, next, small], 3500);
    expect(out[0]).toBe(done);
    expect(out[2]).toBe(small);
    expect(out[1]!.truncated).toBe(true);
    expect(total(out)).toBeLessThanOrEqual(3500);
  });

  it('counts but never cuts messages (failures, approvals) and problem entries', () => {
    const f = failed();
    const big = sized(2000);
    const out = fitBatchBudget([f, null, big], 1500);
    expect(out[0]).toBe(f);
    expect(out[1]).toBeNull();
    expect(out[2]!.truncated).toBe(true);
    expect(total(out)).toBeLessThanOrEqual(1500);
  });

  it('never splits a UTF-8 character', () => {
    const value = { text: 'é😀ü'.repeat(600) };
    for (let budget = 1024; budget < 1100; budget++) {
      const b = succeeded(value);
      const [cut] = fitBatchBudget([b], budget);
      const content = cut!.toolResult.content;
      const shown = content.slice(0, content.indexOf('\n[truncated:'));
      expect(b.toolResult.content.startsWith(shown)).toBe(true);
      expect(content).not.toContain('\uFFFD');
      expect(Buffer.from(content, 'utf8').toString('utf8')).toBe(content);
      expect(bytes(content)).toBeLessThanOrEqual(budget);
    }
  });

  it('leaves a content shorter than the note whole rather than growing it', () => {
    const tiny = Array.from({ length: 20 }, () => sized(100));
    const out = fitBatchBudget(tiny, 1024);
    expect(out).toEqual(tiny);
  });

  it('always fits when every candidate can be cut to more than a note, cutting largest first', () => {
    const body = fc.oneof(
      fc.integer({ min: 12, max: 20_000 }).map(sized),
      fc.integer({ min: 200, max: 3_000 }).map(alreadyTruncated),
      fc.constant(null),
      fc.constant(null).map(failed),
    );
    fc.assert(
      fc.property(fc.array(body, { minLength: 1, maxLength: 32 }), fc.integer({ min: 1024, max: 200 * 1024 }), (bodies, budget) => {
        const fixed = total(bodies.map((b) => (b && (b.truncated || b.status !== 'succeeded') ? b : null)));
        const candidates = bodies.filter((b) => b && !b.truncated && b.status === 'succeeded').length;
        fc.pre(candidates > 0 && (budget - fixed) / candidates > 400);
        const out = fitBatchBudget(bodies, budget);
        expect(total(out)).toBeLessThanOrEqual(Math.max(budget, total(bodies)));
        if (total(bodies) > budget) expect(total(out)).toBeLessThanOrEqual(budget);
        // Nothing but untruncated successes changes, and a cut one was never smaller than one left whole.
        const cutSizes: number[] = [];
        const wholeSizes: number[] = [];
        bodies.forEach((b, i) => {
          if (out[i] === b) {
            if (b && b.status === 'succeeded' && !b.truncated) wholeSizes.push(bytes(b.toolResult.content));
            return;
          }
          expect(b!.status).toBe('succeeded');
          expect(b!.truncated).toBe(false);
          expect(out[i]).toMatchObject({ truncated: true, result: null });
          cutSizes.push(bytes(b!.toolResult.content));
        });
        if (cutSizes.length && wholeSizes.length) expect(Math.min(...cutSizes)).toBeGreaterThanOrEqual(Math.max(...wholeSizes));
      }),
      { numRuns: 300 },
    );
  });
});
