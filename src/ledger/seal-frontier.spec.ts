import { describe, expect, it } from 'vitest';
import { FULL_SCAN_EVERY_MS, GAP_TTL_MS, MAX_GAPS, SealFrontier } from './seal-frontier.js';

/** A frontier past its start-up full scan, having sealed 1..n. */
function settled(n: number, nowMs = 0): SealFrontier {
  const f = new SealFrontier();
  expect(f.startSeq(nowMs, false)).toBe(0);
  f.sealed(Array.from({ length: n }, (_, i) => i + 1), nowMs);
  f.fullScanDone(nowMs);
  return f;
}

describe('SealFrontier', () => {
  it('scans from the start first, then from just past the highest seq it sealed', () => {
    const f = settled(10);
    expect(f.startSeq(100, false)).toBe(11);
    f.sealed([11, 12], 100);
    expect(f.startSeq(200, false)).toBe(13);
    expect(f.openGaps()).toEqual([]);
  });

  it('an explicit full pass always starts at 0', () => {
    expect(settled(10).startSeq(100, true)).toBe(0);
  });

  it('remembers seqs skipped on the way up and starts at the oldest until they are sealed', () => {
    const f = settled(10);
    f.sealed([11, 13, 16], 100); // 12, 14, 15 still in flight
    expect(f.openGaps()).toEqual([12, 14, 15]);
    expect(f.startSeq(200, false)).toBe(12);
    f.sealed([12, 17], 200);
    expect(f.openGaps()).toEqual([14, 15]);
    expect(f.startSeq(300, false)).toBe(14);
    f.sealed([14, 15], 300);
    expect(f.startSeq(400, false)).toBe(18);
  });

  it('does not record gaps below the frontier it already passed', () => {
    const f = settled(10);
    f.sealed([11, 14], 100); // gaps 12, 13
    f.sealed([12], 200); // a straggler below the frontier: no new gaps, frontier stays 14
    expect(f.openGaps()).toEqual([13]);
    expect(f.startSeq(300, false)).toBe(13);
  });

  it('gives a gap up after its TTL (a rolled-back insert) and leaves it to the next full scan', () => {
    const f = settled(10);
    f.sealed([11, 13], 1_000);
    expect(f.startSeq(1_000 + GAP_TTL_MS, false)).toBe(12);
    expect(f.startSeq(1_001 + GAP_TTL_MS, false)).toBe(14);
    expect(f.openGaps()).toEqual([]);
  });

  it('runs a full scan again once FULL_SCAN_EVERY_MS has passed since the last', () => {
    const f = settled(10, 5_000);
    expect(f.startSeq(5_000 + FULL_SCAN_EVERY_MS - 1, false)).toBe(11);
    expect(f.startSeq(5_000 + FULL_SCAN_EVERY_MS, false)).toBe(0);
  });

  it('records no gaps before it knows a frontier (the start-up scan)', () => {
    const f = new SealFrontier();
    f.sealed([5_000_000, 5_000_002], 0); // a restart over a long ledger: 1..4,999,999 were sealed long ago
    expect(f.openGaps()).toEqual([]);
    f.sealed([5_000_005], 0);
    expect(f.openGaps()).toEqual([5_000_003, 5_000_004]);
  });

  it('falls back to a full scan when too many gaps are open', () => {
    const f = settled(10);
    f.sealed([11, 12 + MAX_GAPS + 5], 100);
    expect(f.openGaps()).toEqual([]);
    expect(f.startSeq(200, false)).toBe(0);
    f.sealed([12], 200);
    f.fullScanDone(200);
    expect(f.startSeq(300, false)).toBe(12 + MAX_GAPS + 6);
  });

  it('scans from the start again when the gaps overflowed during the full scan itself', () => {
    const f = settled(10);
    expect(f.startSeq(1_000, true)).toBe(0);
    f.sealed([11, 12 + MAX_GAPS + 5], 1_100); // overflow mid-pass: in-flight inserts among the dropped gaps
    f.fullScanDone(1_000);
    expect(f.startSeq(1_200, false)).toBe(0);
  });
});
