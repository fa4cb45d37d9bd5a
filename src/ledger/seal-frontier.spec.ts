import fc from 'fast-check';
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

  it('a sealed seq above the sequence’s last value (an explicit insert around the gateway) does not move the frontier', () => {
    const f = settled(10);
    f.sealed([11, 12, 2 ** 50], 100, 12);
    expect(f.startSeq(200, false)).toBe(13); // not 2^50 + 1: the sequence's next events are still read
    expect(f.openGaps()).toEqual([]);
    f.sealed([13, 2 ** 50 + 7], 200, 13); // nothing of the sequence's but 13 moves it, however high the rest
    expect(f.startSeq(300, false)).toBe(14);
    f.sealed([2 ** 50 + 9], 300, 13); // a batch of nothing but such rows moves nothing
    expect(f.startSeq(400, false)).toBe(14);
    expect(f.openGaps()).toEqual([]);
  });

  it('records gaps only up to the highest seq the sequence handed out', () => {
    const f = settled(10);
    f.sealed([11, 14, 500], 100, 15); // 15 is still in flight: not a gap, the next pass starts at it anyway
    expect(f.openGaps()).toEqual([12, 13]);
    expect(f.startSeq(200, false)).toBe(12);
    f.sealed([12, 13, 15], 200, 15);
    expect(f.startSeq(300, false)).toBe(16);
  });

  describe('against a model of the sealer (random schedules of inserts, commits, rollbacks, passes and time)', () => {
    /** An insert: its seq is taken when it starts; it commits (visible to passes) or rolls back later. */
    interface Ev {
      seq: number;
      startedMs: number;
      committedMs: number | null;
      rolledBack: boolean;
      sealed: boolean;
    }
    type Cmd =
      | { k: 'start'; n: number }
      | { k: 'commit'; pick: number }
      | { k: 'rollback'; pick: number }
      | { k: 'advance'; ms: number }
      | { k: 'pass'; full: boolean; lockLostAt: number | null }
      | { k: 'other'; n: number }
      | { k: 'settle' };
    const BATCH = 3; // the service reads 500 at a time; a small batch exercises multi-batch passes
    const cmd: fc.Arbitrary<Cmd> = fc.oneof(
      { weight: 4, arbitrary: fc.record({ k: fc.constant('start' as const), n: fc.integer({ min: 1, max: 4 }) }) },
      { weight: 4, arbitrary: fc.record({ k: fc.constant('commit' as const), pick: fc.nat() }) },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('rollback' as const), pick: fc.nat() }) },
      {
        weight: 3,
        arbitrary: fc.record({
          k: fc.constant('advance' as const),
          ms: fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 0, max: 2_000 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 70_000 }) }),
        }),
      },
      {
        weight: 4,
        arbitrary: fc.record({
          k: fc.constant('pass' as const),
          full: fc.integer({ min: 0, max: 4 }).map((n) => n === 0),
          lockLostAt: fc.option(fc.integer({ min: 0, max: 2 }), { freq: 8 }),
        }),
      },
      { weight: 1, arbitrary: fc.record({ k: fc.constant('other' as const), n: fc.integer({ min: 1, max: 3 }) }) },
    );

    /** Runs a schedule and checks, after every pass that held the lock throughout, what the sealer promises. */
    function run(cmds: Cmd[]): { events: Ev[] } {
      const f = new SealFrontier();
      const events: Ev[] = [];
      let now = 0;
      /** The last seq taken before the first pass that sealed something: until then there is no frontier to find gaps below. */
      let beforeFrontier: number | null = null;
      const inFlight = (): Ev[] => events.filter((e) => e.committedMs === null && !e.rolledBack);
      const unsealedFrom = (start: number): Ev[] => events.filter((e) => e.seq >= start && e.committedMs !== null && !e.sealed);

      /** One pass as LedgerSealerService.sealAll runs it; false when the lock was lost part-way. */
      const pass = (full: boolean, lockLostAt: number | null = null): boolean => {
        const startedMs = now;
        const first = f.startSeq(startedMs, full);
        let start = first;
        for (let batch = 0; ; batch++) {
          if (lockLostAt === batch) return false;
          const rows = unsealedFrom(start).slice(0, BATCH);
          for (const e of rows) e.sealed = true;
          const seqs = rows.map((e) => e.seq);
          f.sealed(seqs, now);
          if (seqs.length > 0 && beforeFrontier === null) beforeFrontier = events.length;
          if (seqs.length < BATCH) {
            if (first === 0) f.fullScanDone(startedMs);
            return true;
          }
          start = seqs[seqs.length - 1] + 1;
        }
      };

      for (const c of cmds) {
        if (c.k === 'start') for (let i = 0; i < c.n; i++) events.push({ seq: events.length + 1, startedMs: now, committedMs: null, rolledBack: false, sealed: false });
        else if (c.k === 'settle') for (const e of inFlight()) e.committedMs = now;
        else if (c.k === 'commit' || c.k === 'rollback') {
          const open = inFlight();
          if (open.length === 0) continue;
          const e = open[c.pick % open.length];
          if (c.k === 'commit') e.committedMs = now;
          else e.rolledBack = true;
        } else if (c.k === 'advance') now += c.ms;
        else if (c.k === 'other') {
          // Another replica held the lock for a pass: it sealed the oldest unsealed events; this frontier saw none of it.
          for (const e of unsealedFrom(0).slice(0, c.n)) e.sealed = true;
        } else {
          const passStartMs = now;
          if (!pass(c.full, c.lockLostAt)) continue;
          for (const e of events) {
            if (e.committedMs === null || e.sealed) continue;
            // Every event committed a full-scan period before the pass began is sealed by it.
            expect(passStartMs - e.committedMs, `seq ${e.seq} committed at ${e.committedMs}, pass at ${passStartMs}`).toBeLessThan(FULL_SCAN_EVERY_MS);
            // An event that started once there was a frontier and is younger than the gap TTL is never skipped.
            const fastPath = beforeFrontier !== null && e.seq > beforeFrontier && passStartMs - e.startedMs <= GAP_TTL_MS;
            expect(fastPath, `seq ${e.seq} (started ${e.startedMs}, committed ${e.committedMs}) left unsealed by the pass at ${passStartMs}`).toBe(false);
          }
        }
      }
      return { events };
    }

    it('a pass leaves no young committed event behind, and none older than the full-scan period', () => {
      fc.assert(
        fc.property(fc.array(cmd, { minLength: 20, maxLength: 300, size: 'max' }), (cmds) => {
          run(cmds);
        }),
        { numRuns: 400 },
      );
    });

    it('once every insert has settled, a periodic pass a full-scan period later leaves nothing committed unsealed', () => {
      fc.assert(
        fc.property(fc.array(cmd, { minLength: 20, maxLength: 300, size: 'max' }), (cmds) => {
          const { events } = run([...cmds, { k: 'settle' }, { k: 'advance', ms: FULL_SCAN_EVERY_MS }, { k: 'pass', full: false, lockLostAt: null }]);
          expect(events.filter((e) => e.committedMs !== null && !e.sealed).map((e) => e.seq)).toEqual([]);
        }),
        { numRuns: 200 },
      );
    });
  });
});
