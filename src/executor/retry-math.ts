/**
 * Delay before retry `attempt` (1-based): exponential backoff with full jitter
 * (a random delay in [0, base·2^(attempt-1)], capped). When the vendor said
 * how long to wait (Retry-After, THROTTLED cost maths, SP-API's 1/rate), that
 * wait comes first and the jitter is added on top: never sooner than asked,
 * and callers refused together do not all come back in the same instant
 * (VENDORS.md §2.5: "with jitter and exponential growth").
 */
export function retryDelayMs(attempt: number, retryAfterMs: number | undefined, opts: { baseMs: number; maxMs: number }, random: () => number = Math.random): number {
  const ceiling = Math.min(opts.maxMs, opts.baseMs * 2 ** Math.max(0, attempt - 1));
  const jittered = Math.floor(random() * ceiling);
  return (retryAfterMs ?? 0) + jittered;
}
