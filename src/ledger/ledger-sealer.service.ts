import { Inject, Injectable, Logger, type OnApplicationBootstrap, type BeforeApplicationShutdown } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { PeriodicTask } from '../common/periodic-task.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { CREATED_ISO_SQL, eventHash, GENESIS_HASH } from './ledger-chain.js';
import { SealFrontier } from './seal-frontier.js';

/** Any constant works; it only has to be the same for every replica. */
const SEALER_LOCK_KEY = 7_413_920_551;
const BATCH = 2_000;

interface UnsealedRow {
  seq: string;
  id: string;
  org_id: string;
  type: string;
  run_id: string | null;
  tool_call_id: string | null;
  actor: unknown;
  metadata: unknown;
  created_iso: string;
}

/**
 * Links committed events into each org's hash chain, in `seq` order, a batch
 * at a time. One sealer runs at a time across all replicas (advisory lock), so
 * chains never fork; appends themselves never wait for it.
 */
@Injectable()
export class LedgerSealerService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly log = new Logger('LedgerSealer');
  private readonly task: PeriodicTask;
  private running?: Promise<number>;
  private readonly frontier = new SealFrontier();

  constructor(
    private readonly ds: DataSource,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.task = new PeriodicTask('sealing', config.LEDGER_SEAL_INTERVAL_MS, () => this.seal(false), this.log);
  }

  onApplicationBootstrap(): void {
    this.task.start();
  }

  /** Before, not on, application shutdown: a pass must not have the DataSource destroyed under it (TypeORM closes it in its own onApplicationShutdown, ahead of this module's). */
  async beforeApplicationShutdown(): Promise<void> {
    await this.task.stop();
    await this.running?.catch(() => undefined); // a pass a caller (verify) started
  }

  /** Seals everything committed so far (a full scan); returns how many events it sealed. */
  sealNow(): Promise<number> {
    return this.seal(true);
  }

  private async seal(full: boolean): Promise<number> {
    // Coalesce concurrent callers onto one pass, then run another for anything newer.
    while (this.running) await this.running.catch(() => undefined);
    this.running = this.sealAll(full);
    try {
      return await this.running;
    } finally {
      this.running = undefined;
    }
  }

  private async sealAll(full: boolean): Promise<number> {
    let total = 0;
    const startedMs = Date.now();
    const first = this.frontier.startSeq(startedMs, full);
    let start = first;
    for (;;) {
      const seqs = await this.sealBatch(start);
      if (seqs === null) return total; // another replica is sealing
      this.frontier.sealed(seqs, Date.now());
      total += seqs.length;
      if (seqs.length < BATCH) {
        if (first === 0) this.frontier.fullScanDone(startedMs);
        return total;
      }
      start = seqs[seqs.length - 1] + 1;
    }
  }

  /** Seals the next batch from `start`; the seqs it sealed, ascending, or null when another replica holds the lock. */
  private async sealBatch(start: number): Promise<number[] | null> {
    return this.ds.transaction(async (m) => {
      const [{ locked }] = (await m.query('SELECT pg_try_advisory_xact_lock($1) AS locked', [SEALER_LOCK_KEY])) as [{ locked: boolean }];
      if (!locked) return null;
      const rows = (await m.query(
        `SELECT seq, id, org_id, type, run_id, tool_call_id, actor, metadata, ${CREATED_ISO_SQL} AS created_iso
           FROM runtime_ledger_events WHERE hash IS NULL AND seq >= $1 ORDER BY seq LIMIT ${BATCH}`,
        [start],
      )) as UnsealedRow[];
      if (rows.length === 0) return [];
      const orgs = [...new Set(rows.map((r) => r.org_id))];
      // One backward step on ledger_events_chain_uq per org. (A DISTINCT ON over the orgs' events
      // read every sealed event of the org on each pass: cost grew with the ledger.)
      const heads = (await m.query(
        `SELECT o.org_id, h.chain_seq, h.hash FROM unnest($1::uuid[]) AS o(org_id)
           CROSS JOIN LATERAL (SELECT e.chain_seq, e.hash FROM runtime_ledger_events e
                                WHERE e.org_id = o.org_id AND e.chain_seq IS NOT NULL
                                ORDER BY e.chain_seq DESC LIMIT 1) h`,
        [orgs],
      )) as { org_id: string; chain_seq: string; hash: string }[];
      const head = new Map(heads.map((h) => [h.org_id, { seq: Number(h.chain_seq), hash: h.hash }]));
      const seqs: string[] = [];
      const chainSeqs: number[] = [];
      const prevs: string[] = [];
      const hashes: string[] = [];
      for (const r of rows) {
        const h = head.get(r.org_id) ?? { seq: 0, hash: GENESIS_HASH };
        const chainSeq = h.seq + 1;
        const hash = eventHash(h.hash, {
          id: r.id,
          orgId: r.org_id,
          chainSeq,
          type: r.type,
          runId: r.run_id,
          toolCallId: r.tool_call_id,
          actor: r.actor,
          metadata: r.metadata,
          createdIso: r.created_iso,
        });
        seqs.push(r.seq);
        chainSeqs.push(chainSeq);
        prevs.push(h.hash);
        hashes.push(hash);
        head.set(r.org_id, { seq: chainSeq, hash });
      }
      await m.query(
        `UPDATE runtime_ledger_events e SET chain_seq = v.chain_seq, prev_hash = v.prev_hash, hash = v.hash, sealed_at = clock_timestamp()
           FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS v(seq, chain_seq, prev_hash, hash)
          WHERE e.seq = v.seq`,
        [seqs, chainSeqs, prevs, hashes],
      );
      return seqs.map(Number);
    });
  }
}
