/** Where an org's chain waits: the first of its events the sealer cannot hash, or cannot give a position (MAX_CHAIN_SEQ). */
export interface ChainStop {
  seq: number;
  eventId: string;
}

/**
 * The orgs whose chain the sealer has stopped, each at an event of theirs it
 * cannot hash (see eventHashOrNull), or the first one it cannot chain because
 * a row written around the gateway already holds the org's last possible
 * position (MAX_CHAIN_SEQ, ledger-chain.ts). Such an event cannot be sealed while
 * that row stands. Failing the whole pass on it stopped sealing for every org;
 * linking the org's later events past it would leave it off the chain for good.
 * So only that org waits behind it, until a full scan no longer meets it (the
 * row was removed).
 *
 * Kept per process: every replica's sealer starts with a full scan, which meets
 * the stops that stand. The waiting events look like gaps to the SealFrontier,
 * so passes re-read them for a while, then full scans do: a cost paid only
 * while a stop stands.
 */
export class ChainStops {
  private readonly stops = new Map<string, ChainStop>();
  /** Orgs whose stop the full scan in progress has met again; null outside a full scan. */
  private met: Set<string> | null = null;

  get size(): number {
    return this.stops.size;
  }

  /** A pass from seq 0 begins. */
  fullScanStarted(): void {
    this.met = new Set();
  }

  /** Whether an event must wait behind its org's stop. */
  waits(orgId: string, seq: number): boolean {
    const stop = this.stops.get(orgId);
    return stop !== undefined && seq > stop.seq;
  }

  /** Records an event that cannot be hashed; true when it is a new stop (the one worth a log line). */
  stop(orgId: string, seq: number, eventId: string): boolean {
    this.met?.add(orgId);
    const known = this.stops.get(orgId);
    if (known && known.seq <= seq) return false;
    this.stops.set(orgId, { seq, eventId });
    return true;
  }

  /** A full scan read to the end: the stops it did not meet are lifted. Returns them. */
  fullScanDone(): [orgId: string, ChainStop][] {
    const lifted = [...this.stops].filter(([orgId]) => !this.met?.has(orgId));
    for (const [orgId] of lifted) this.stops.delete(orgId);
    this.met = null;
    return lifted;
  }
}
