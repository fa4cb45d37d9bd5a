import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { sharedAbortController } from './shared-abort.js';

/** Waits `count` sleeps on the controller's signal, aborts them, and returns the listener-limit warnings emitted. */
async function leakWarnings(controller: AbortController, count: number): Promise<{ warnings: string[]; outcomes: string[] }> {
  const warnings: string[] = [];
  const onWarning = (w: Error): void => {
    if (w.name === 'MaxListenersExceededWarning') warnings.push(w.message);
  };
  process.on('warning', onWarning);
  try {
    const waits = Array.from({ length: count }, () => sleep(60_000, undefined, { signal: controller.signal }).then(() => 'slept', (e: Error) => e.name));
    await sleep(20); // the warning is emitted on a later tick than the listener that crossed the limit
    controller.abort();
    return { warnings, outcomes: await Promise.all(waits) };
  } finally {
    process.off('warning', onWarning);
  }
}

describe('sharedAbortController', () => {
  it('takes any number of waits on its signal without a MaxListenersExceededWarning, and still aborts them all', async () => {
    const { warnings, outcomes } = await leakWarnings(sharedAbortController(), 50);
    expect(warnings).toEqual([]);
    expect(outcomes).toEqual(Array.from({ length: 50 }, () => 'AbortError'));
  });

  it('(a plain AbortController warns at the eleventh wait: what the helper is for)', async () => {
    const { warnings } = await leakWarnings(new AbortController(), 11);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('11 abort listeners');
  });
});
