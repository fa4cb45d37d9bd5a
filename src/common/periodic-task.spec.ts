import { Logger } from '@nestjs/common';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PeriodicTask } from './periodic-task.js';

describe('PeriodicTask', () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  const logger = (): { log: Logger; warnings: string[]; infos: string[] } => {
    const log = new Logger('test');
    const warnings: string[] = [];
    const infos: string[] = [];
    vi.spyOn(log, 'warn').mockImplementation((m: unknown) => void warnings.push(String(m)));
    vi.spyOn(log, 'log').mockImplementation((m: unknown) => void infos.push(String(m)));
    return { log, warnings, infos };
  };

  it('haltOn: no run starts once the signal aborts; the run in progress finishes, and stop() waits for it', async () => {
    vi.useFakeTimers();
    const { log } = logger();
    const stop = new AbortController();
    const starts: number[] = [];
    let finished = 0;
    const task = new PeriodicTask('work', 100, async () => {
      starts.push(Date.now());
      await new Promise((r) => setTimeout(r, 50));
      finished++;
    }, log).haltOn(stop.signal);
    const t0 = Date.now();
    task.start(10);
    await vi.advanceTimersByTimeAsync(30); // the first run is in progress
    stop.abort();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(starts.map((s) => s - t0)).toEqual([10]);
    expect(finished).toBe(1);
    await task.stop();
    // Halted before it started: it never runs. No signal: runs as ever.
    const never = new PeriodicTask('never', 100, async () => void starts.push(-1), log).haltOn(AbortSignal.abort());
    never.start(0);
    const ever = new PeriodicTask('ever', 100, async () => void starts.push(1), log).haltOn(undefined);
    ever.start(0);
    await vi.advanceTimersByTimeAsync(50);
    expect(starts.slice(1)).toEqual([1]);
    await Promise.all([never.stop(), ever.stop()]);
  });

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

  it('a streak of failures is one warning, then one when the error changes or a minute has passed, and one line on recovery', async () => {
    vi.useFakeTimers();
    const { log, warnings, infos } = logger();
    let error: string | null = 'database unavailable';
    let runs = 0;
    const task = new PeriodicTask('sealing', 200, async () => {
      runs++;
      if (error) throw new Error(error);
    }, log, () => Date.now());
    task.start(0);
    await vi.advanceTimersByTimeAsync(30_000); // 151 failed runs (t = 0 … 30 s)
    expect(warnings).toEqual(['sealing failed: database unavailable']);
    error = 'connection refused';
    await vi.advanceTimersByTimeAsync(200); // the error changes: said at once, with the runs not logged since
    expect(warnings).toHaveLength(2);
    expect(warnings[1]).toBe('sealing still failing, 152 runs in a row over 30.2 s: connection refused (150 more failed runs not logged since the last line)');
    await vi.advanceTimersByTimeAsync(59_800); // no line until a minute after the last one
    expect(warnings).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(200);
    expect(warnings).toHaveLength(3);
    expect(warnings[2]).toBe('sealing still failing, 452 runs in a row over 90.2 s: connection refused (299 more failed runs not logged since the last line)');
    expect(infos).toEqual([]);
    error = null;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(infos).toEqual(['sealing works again after 452 failed runs over 90.4 s']);
    // a new streak after recovery starts with a plain warning again
    error = 'database unavailable';
    await vi.advanceTimersByTimeAsync(1_000);
    await task.stop();
    expect(warnings).toHaveLength(4);
    expect(warnings[3]).toBe('sealing failed: database unavailable');
    expect(infos).toHaveLength(1);
    expect(runs).toBeGreaterThan(460);
  });

  it('causes that alternate (a dead pooled connection, then a connect timeout) are each said once, then only the minute\'s reminder', async () => {
    vi.useFakeTimers();
    const { log, warnings } = logger();
    let n = 0;
    const task = new PeriodicTask('sealing', 200, async () => {
      n++;
      throw new Error(n % 2 ? 'Query read timeout' : 'timeout exceeded when trying to connect');
    }, log, () => Date.now());
    task.start(0);
    await vi.advanceTimersByTimeAsync(60_300); // 302 failed runs (t = 0 … 60.2 s)
    await task.stop();
    expect(n).toBe(302);
    expect(warnings).toEqual([
      'sealing failed: Query read timeout',
      'sealing still failing, 2 runs in a row over 0.2 s: timeout exceeded when trying to connect',
      'sealing still failing, 302 runs in a row over 60.2 s: timeout exceeded when trying to connect (299 more failed runs not logged since the last line)',
    ]);
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
