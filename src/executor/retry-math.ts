/**
 * Delay before retry `attempt` (1-based): exponential backoff with full jitter
 * (a random delay in [0, base·2^(attempt-1)], capped), but never shorter than
 * what the vendor asked for with Retry-After.
 */
export function retryDelayMs(attempt: number, retryAfterMs: number | undefined, opts: { baseMs: number; maxMs: number }, random: () => number = Math.random): number {
  const ceiling = Math.min(opts.maxMs, opts.baseMs * 2 ** Math.max(0, attempt - 1));
  const jittered = Math.floor(random() * ceiling);
  return Math.max(jittered, retryAfterMs ?? 0);
}
