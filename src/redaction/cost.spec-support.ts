/**
 * For the redaction specs' cost checks: hostile input (repeated heads, long runs of separators or escapes) must
 * cost about what ordinary prose of the same length does, never the quadratic time a backtracking pattern takes.
 */
import { expect } from 'vitest';

const PROSE = 'the parcel left the depot on time ';

/** CPU time, in µs, of `redact` over every text. */
function cpuOf(texts: readonly string[], redact: (text: string) => void): number {
  const before = process.cpuUsage();
  for (const text of texts) redact(text);
  const used = process.cpuUsage(before);
  return used.user + used.system;
}

/** `redact` over the hostile texts takes at most 20× (plus 0.5 s) what it takes over prose of the same lengths. */
export function expectNoWorseThanProse(hostile: readonly string[], redact: (text: string) => void): void {
  const prose = hostile.map((text) => PROSE.repeat(Math.ceil(text.length / PROSE.length)).slice(0, text.length));
  cpuOf(prose.map((text) => text.slice(0, 5_000)), redact); // warm up
  const baseline = cpuOf(prose, redact);
  const took = cpuOf(hostile, redact);
  expect(took, `hostile ${Math.round(took / 1_000)} ms, prose ${Math.round(baseline / 1_000)} ms (CPU)`).toBeLessThan(20 * baseline + 500_000);
}
