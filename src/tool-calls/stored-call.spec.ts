import { describe, expect, it } from 'vitest';
import { remainingWait } from './stored-call.js';

describe('remainingWait: a stored vendor wait, counted down from when the call ended', () => {
  const ended = new Date('2026-12-04T12:00:00.000Z');
  const at = (ms: number) => ended.getTime() + ms;

  it('none stored: none answered', () => {
    expect(remainingWait(null, ended, at(0))).toBeNull();
    expect(remainingWait(0, ended, at(0))).toBeNull();
  });

  it('the whole wait at first, then what is left, rounded up to whole seconds', () => {
    expect(remainingWait(30, ended, at(0))).toBe(30);
    expect(remainingWait(30, ended, at(1))).toBe(30);
    expect(remainingWait(30, ended, at(1_000))).toBe(29);
    expect(remainingWait(30, ended, at(28_001))).toBe(2);
    expect(remainingWait(30, ended, at(29_000))).toBe(1);
  });

  it('left out once passed (never 0 or negative)', () => {
    expect(remainingWait(30, ended, at(29_999))).toBe(1);
    expect(remainingWait(30, ended, at(30_001))).toBeNull();
    expect(remainingWait(30, ended, at(30_000))).toBeNull();
    expect(remainingWait(30, ended, at(86_400_000))).toBeNull();
  });

  it('a clock behind the row (another host stamped it) counts no time as passed; no end time keeps the wait as stored', () => {
    expect(remainingWait(30, ended, at(-5_000))).toBe(30);
    expect(remainingWait(30, null, at(0))).toBe(30);
  });
});
