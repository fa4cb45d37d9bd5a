/**
 * For specs that bound a cost against another measured at the same moment: the median of five runs, in ms, so one slow
 * run (a GC, another process) does not decide. `fn` may throw (a refused input): the throw is part of its cost.
 */
export function medianMs(fn: () => unknown): number {
  const runs: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    try {
      fn();
    } catch {
      // timed all the same
    }
    runs.push(performance.now() - t);
  }
  return runs.sort((a, b) => a - b)[2]!;
}
