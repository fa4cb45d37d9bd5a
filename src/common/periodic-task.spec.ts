import { Logger } from '@nestjs/common';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PeriodicTask } from './periodic-task.js';

describe('PeriodicTask', () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  const logger = (): { log: Logger; warnings: string[] } => {
    const log = new Logger('test');
    const warnings: string[] = [];
    vi.spyOn(log, 'warn').mockImplementation((m: unknown) => void warnings.push(String(m)));
    return { log, warnings };
  };

  it('runs after the first delay, then one period after each run ends, never overlapping', async () => {
    vi.useFakeTimers();
    const { log } = logger();
    let active = 0;
    let maxActive = 0;
    const starts: number[] = [];
    const task = new PeriodicTask('work', 100, async () => {
      active++;
      maxActive = Math.max(maxActive, active);
      starts.push(Date.now());
      await new Promise((r) => setTimeout(r, 250)); // longer than the period
      active--;
    }, log);
    const t0 = Date.now();
    task.start(10);
    await vi.advanceTimersByTimeAsync(1_000);
    await task.stop();
    expect(maxActive).toBe(1);
    expect(starts.map((s) => s - t0)).toEqual([10, 360, 710]);
  });

  it('logs a failed run and keeps going', async () => {
    vi.useFakeTimers();
    const { log, warnings } = logger();
    let runs = 0;
    const task = new PeriodicTask('the sweep', 50, async () => {
      runs++;
      if (runs === 1) throw new Error('database unavailable');
    }, log);
    task.start(0);
    await vi.advanceTimersByTimeAsync(120);
    await task.stop();
    expect(warnings).toEqual(['the sweep failed: database unavailable']);
    expect(runs).toBe(3);
  });

  it('stop() waits for the run in progress and schedules no more', async () => {
    const { log } = logger();
    let finished = 0;
    let started = 0;
    const task = new PeriodicTask('work', 5, async () => {
      started++;
      await new Promise((r) => setTimeout(r, 50));
      finished++;
    }, log);
    task.start(0);
    await new Promise((r) => setTimeout(r, 10));
    expect(started).toBe(1);
    await task.stop();
    expect(finished).toBe(1);
    await new Promise((r) => setTimeout(r, 30));
    expect(started).toBe(1);
  });
});
