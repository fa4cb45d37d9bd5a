/** How long a skipped seq (an insert still in flight when a later one was sealed) is looked for on every pass. */
export const GAP_TTL_MS = 30_000;
/** Past this many open gaps the next pass scans from the start instead. */
export const MAX_GAPS = 10_000;
/** Every periodic pass this long after the last full one scans from the start: the backstop for gaps given up on. */
export const FULL_SCAN_EVERY_MS = 60_000;

/**
 * Where the next incremental pass starts reading unsealed events.
 *
 * A sealed event leaves a dead entry behind in ledger_events_unsealed_idx until
 * VACUUM, and `WHERE hash IS NULL ORDER BY seq` walks every one of them from the
 * oldest: under load that was ~40,000 index entries per pass (5 passes a second),
 * growing with the table. So a pass starts at the frontier (the highest seq this
 * process has sealed that the seq sequence handed out, see sealed()) or at the
 * oldest gap below it, whichever is lower.
 *
 * A gap is a seq below the frontier that was not there when the frontier passed
 * it: an insert whose transaction had not committed yet (seqs are taken at insert,
 * commits land in any order), or one that rolled back and never will. Gaps are
 * looked for on every pass for GAP_TTL_MS (a ledger write is one statement under
 * the 15 s statement timeout), then left to the full scan from seq 0 that runs
 * every FULL_SCAN_EVERY_MS, on start-up, and on every explicit sealNow().
 *
 * Each replica keeps its own frontier. One that seldom wins the sealer lock is
 * behind: it reads from lower than it needs to and may take what other replicas
 * sealed for gaps (or overflow into a full scan), which costs a longer scan but
 * never misses an event.
 */
export class SealFrontier {
  private frontier = 0;
  private readonly gaps = new Map<number, number>(); // seq → when it was first missed
  private fullScanDue = true;
  private lastFullScanMs = -Infinity;
  private overflowMs = -Infinity;

  /** The lowest seq the next pass must read (0 = a full scan). `nowMs` here and in sealed(): performance.now(), durations only. */
  startSeq(nowMs: number, full: boolean): number {
    for (const [seq, since] of this.gaps) if (nowMs - since > GAP_TTL_MS) this.gaps.delete(seq);
    if (full || this.fullScanDue || nowMs - this.lastFullScanMs >= FULL_SCAN_EVERY_MS) return 0;
    let start = this.frontier + 1;
    for (const seq of this.gaps.keys()) if (seq < start) start = seq;
    return start;
  }

  /**
   * Records one batch of a pass: the seqs it sealed, ascending, and `ceiling`, the last value the
   * seq sequence had handed out when the batch was read. A seq above it was not the sequence's: a
   * row inserted around the gateway with an explicit seq (OVERRIDING SYSTEM VALUE). It is sealed,
   * but does not move the frontier: one such row at 2^50 made every later pass start past every
   * event the sequence would ever hand out, and all orgs' new events waited for a full scan.
   */
  sealed(seqs: number[], nowMs: number, ceiling = Number.POSITIVE_INFINITY): void {
    for (const seq of seqs) this.gaps.delete(seq);
    const top = seqs.findLast((seq) => seq <= ceiling) ?? 0;
    if (top <= this.frontier) return;
    if (this.frontier > 0) {
      // Only between the old frontier and the new one: below it, a missing seq was sealed before or is a known gap.
      // (With no frontier yet, the full scan after start-up, anything missed is the next full scan's.)
      const sealedNow = new Set(seqs);
      for (let seq = this.frontier + 1; seq < top && this.gaps.size <= MAX_GAPS; seq++) if (!sealedNow.has(seq)) this.gaps.set(seq, nowMs);
    }
    this.frontier = top;
    if (this.gaps.size > MAX_GAPS) {
      this.gaps.clear();
      this.fullScanDue = true;
      this.overflowMs = nowMs;
    }
  }

  /** A pass from seq 0 read to the end: every event committed before it began is sealed. */
  fullScanDone(startedMs: number): void {
    // Gaps dropped during this very pass may be inserts still in flight: the next pass scans from the start again.
    if (this.overflowMs < startedMs) this.fullScanDue = false;
    this.lastFullScanMs = startedMs;
  }

  /** The gaps still looked for (for tests and metrics). */
  openGaps(): number[] {
    return [...this.gaps.keys()].sort((a, b) => a - b);
  }
}
