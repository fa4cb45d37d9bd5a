import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { renderForModel } from '../../executor/result-budget.js';
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
/** A result of 2n bytes as the per-result budget of n bytes left it: a prefix and the note. */
const alreadyTruncated = (n: number): ToolCallBody => {
  const b = sized(2 * n);
  const rendered = renderForModel(b.toolResult.content, n, b.toolCallId);
  return { ...b, result: null, truncated: rendered.truncated, toolResult: { ...b.toolResult, content: rendered.content } };
};
const shownOf = (content: string) => content.slice(0, content.indexOf('\n[truncated:'));
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

  // API.md: the batch budget "counts every result's model-facing content, truncated ones included" and
  // "truncates the largest results first": one already cut by the per-result budget is no exception.
  it('cuts a result already truncated by the per-result budget further when it is the largest (it counts)', () => {
    const done = alreadyTruncated(2500);
    const next = sized(1500);
    const small = sized(400);
    expect(bytes(done.toolResult.content)).toBeGreaterThan(2490);
    const out = fitBatchBudget([done, next, small], 3500);
    expect(out[1]).toBe(next);
    expect(out[2]).toBe(small);
    const cut = out[0]!;
    expect(cut).toMatchObject({ truncated: true, result: null, status: 'succeeded', toolCallId: done.toolCallId });
    expect(total(out)).toBeLessThanOrEqual(3500);
    // Only as far as needed, from the prefix it showed; the note still tells the size of the whole result and where it is.
    expect(bytes(cut.toolResult.content)).toBeGreaterThan(3500 - 1900 - 10);
    expect(shownOf(done.toolResult.content).startsWith(shownOf(cut.toolResult.content))).toBe(true);
    expect(cut.toolResult.content).toContain(`[truncated: the result is 5000 bytes of JSON and only the first ${bytes(shownOf(cut.toolResult.content))} are shown.`);
    expect(cut.toolResult.content).toContain(`The full result is available from GET /v1/tool-calls/${done.toolCallId}/result]`);
    expect(done.toolResult.content).not.toBe(cut.toolResult.content); // the input is not mutated
  });

  it('still cuts the largest first: a smaller already-truncated result stays as it is', () => {
    const done = alreadyTruncated(1000);
    const big = sized(4000);
    const out = fitBatchBudget([done, big], 3500);
    expect(out[0]).toBe(done);
    expect(out[1]!.truncated).toBe(true);
    expect(total(out)).toBeLessThanOrEqual(3500);
  });

  it('fits results that were all cut by the per-result budget (two 3000-byte cuts within 4096)', () => {
    const bodies = [alreadyTruncated(3000), alreadyTruncated(3000)];
    expect(total(bodies)).toBeGreaterThan(4096);
    const out = fitBatchBudget(bodies, 4096);
    expect(total(out)).toBeLessThanOrEqual(4096);
    for (const b of out) expect(bytes(b!.toolResult.content)).toBeGreaterThan(1900); // fair shares, not one cut to the bone
  });

  // Water-filling: the room left is shared among the results above the level only; a small result that stays
  // whole takes its own size, not a share (cutting by room / every pending entry cut the largest far below the rest).
  it('cuts the largest results to one level: 50/45/5 KB within 60 KB end about 27.5/27.5/5 KB', () => {
    const bodies = [sized(50_000), sized(45_000), sized(5_000)];
    const out = fitBatchBudget(bodies, 60_000);
    const sizes = out.map((b) => bytes(b!.toolResult.content));
    expect(out[2]).toBe(bodies[2]);
    expect(total(out)).toBeLessThanOrEqual(60_000);
    expect(sizes[0]).toBeGreaterThanOrEqual(sizes[1]);
    for (const n of sizes.slice(0, 2)) expect(Math.abs(n - 27_500)).toBeLessThan(50);
  });

  it('leaves equal results equal: four of 50 KB and one of 10 KB within 150 KB end at 35 KB each', () => {
    const bodies = [sized(50_000), sized(50_000), sized(50_000), sized(50_000), sized(10_000)];
    const out = fitBatchBudget(bodies, 150_000);
    const sizes = out.map((b) => bytes(b!.toolResult.content));
    expect(out[4]).toBe(bodies[4]);
    expect(total(out)).toBeLessThanOrEqual(150_000);
    expect(Math.max(...sizes.slice(0, 4)) - Math.min(...sizes.slice(0, 4))).toBeLessThan(50);
    for (const n of sizes.slice(0, 4)) expect(Math.abs(n - 35_000)).toBeLessThan(50);
  });

  it('levels an already-truncated result with a whole one beside a message', () => {
    const done = alreadyTruncated(6000); // about 6000 bytes shown of 12000
    const big = sized(9000);
    const f = failed(); // 300 bytes, never cut
    const out = fitBatchBudget([done, big, f], 8300);
    const sizes = out.map((b) => bytes(b!.toolResult.content));
    expect(out[2]).toBe(f);
    expect(total(out)).toBeLessThanOrEqual(8300);
    for (const n of sizes.slice(0, 2)) expect(Math.abs(n - 4000)).toBeLessThan(50);
  });

  it('leaves a truncated content whose note it cannot read as it is (it still counts)', () => {
    const odd = { ...sized(3000), result: null, truncated: true };
    const big = sized(2000);
    const out = fitBatchBudget([odd, big], 4000);
    expect(out[0]).toBe(odd);
    expect(out[1]!.truncated).toBe(true);
    expect(total(out)).toBeLessThanOrEqual(4000);
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

  it('always fits when every candidate (already truncated ones included) can be cut to more than a note, cutting largest first', () => {
    const body = fc.oneof(
      fc.integer({ min: 12, max: 20_000 }).map(sized),
      fc.integer({ min: 200, max: 3_000 }).map(alreadyTruncated),
      fc.constant(null),
      fc.constant(null).map(failed),
    );
    fc.assert(
      fc.property(fc.array(body, { minLength: 1, maxLength: 32 }), fc.integer({ min: 1024, max: 200 * 1024 }), (bodies, budget) => {
        const fixed = total(bodies.map((b) => (b && b.status !== 'succeeded' ? b : null)));
        const candidates = bodies.filter((b) => b && b.status === 'succeeded').length;
        fc.pre(candidates > 0 && (budget - fixed) / candidates > 400);
        const out = fitBatchBudget(bodies, budget);
        expect(total(out)).toBeLessThanOrEqual(Math.max(budget, total(bodies)));
        if (total(bodies) > budget) expect(total(out)).toBeLessThanOrEqual(budget);
        // Nothing but successes (whole or already truncated) changes, and a cut one was never smaller than one left as it was.
        const cutSizes: number[] = [];
        const wholeSizes: number[] = [];
        bodies.forEach((b, i) => {
          if (out[i] === b) {
            if (b && b.status === 'succeeded') wholeSizes.push(bytes(b.toolResult.content));
            return;
          }
          expect(b!.status).toBe('succeeded');
          expect(out[i]).toMatchObject({ truncated: true, result: null });
          cutSizes.push(bytes(b!.toolResult.content));
        });
        if (cutSizes.length && wholeSizes.length) expect(Math.min(...cutSizes)).toBeGreaterThanOrEqual(Math.max(...wholeSizes));
        // Water-filling: a larger result never ends shorter than a smaller one that was cut, and the cut ones end
        // about level (a few bytes apart: UTF-8 boundaries and the digits of their notes).
        const cutOnes = bodies.flatMap((b, i) => (out[i] !== b ? [{ before: bytes(b!.toolResult.content), after: bytes(out[i]!.toolResult.content) }] : []));
        for (const a of cutOnes) for (const b of cutOnes) if (a.before > b.before) expect(a.after).toBeGreaterThanOrEqual(b.after - 10);
        const cutAfter = cutOnes.map((c) => c.after);
        if (cutAfter.length > 1 && Math.min(...cutAfter) > 400) expect(Math.max(...cutAfter) - Math.min(...cutAfter)).toBeLessThan(cutAfter.length * 10);
      }),
      { numRuns: 300 },
    );
  });
});
