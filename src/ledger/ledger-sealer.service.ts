import { Inject, Injectable, Logger, Optional, type OnApplicationBootstrap, type BeforeApplicationShutdown } from '@nestjs/common';
import { ShutdownPhase } from '../common/shutdown-phase.js';
import { DataSource, type EntityManager } from 'typeorm';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { PeriodicTask } from '../common/periodic-task.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { ChainStops } from './chain-stops.js';
import { morePages, type SizedRow } from '../db/sized-page.js';
import { CREATED_ISO_SQL, eventHashOrNull, GENESIS_HASH, MAX_CHAIN_SEQ, storedBytesPage } from './ledger-chain.js';
import { SealFrontier } from './seal-frontier.js';

/** Any constant works; it only has to be the same for every replica. */
const SEALER_LOCK_KEY = 7_413_920_551;
const BATCH = 2_000;
/**
 * SQLSTATE class 42, "syntax error or access rule violation", or 3F000, "invalid schema name": the role may not
 * execute ledger_seq_ceiling() (42501), or the function no longer works as written (a relation, function or schema it
 * names is gone: 42P01, 42883, 3F000). Either way the statement failed before it read anything; a lost connection or
 * a timeout is another class, and fails the pass.
 */
const ceilingUnusable = (err: unknown): boolean => /^(42|3F000$)/.test(String((err as { code?: unknown }).code ?? ''));

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
 * One batch: the seqs it sealed (ascending), how many unsealed rows it read, whether more may follow (a whole batch,
 * or one cut by bytes), the last seq read, and the sequence's last value once read.
 */
interface BatchResult {
  sealed: number[];
  read: number;
  more: boolean;
  lastSeq: number;
  ceiling: number;
}

/**
 * Links committed events into each org's hash chain, in `seq` order, a batch
 * at a time. One sealer runs at a time across all replicas (advisory lock), so
 * chains never fork; appends themselves never wait for it. An event it cannot
 * hash, or one whose org's chain has no position left for it (MAX_CHAIN_SEQ),
 * stops its own org's chain only (ChainStops).
 */
@Injectable()
export class LedgerSealerService implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly log = new Logger('LedgerSealer');
  private readonly task: PeriodicTask;
  private running?: Promise<number>;
  private readonly frontier = new SealFrontier();
  private readonly stops = new ChainStops();
  /** ledger_seq_ceiling() was refused (and said so once): passes seal with no ceiling until it answers again. */
  private ceilingRefused = false;

  constructor(
    private readonly ds: DataSource,
    @Inject(APP_CONFIG) config: AppConfig,
    /** absent in the ledger:verify CLI, which seals once and exits */
    @Optional() private readonly metrics?: MetricsService,
    @Optional() phase?: ShutdownPhase,
  ) {
    this.task = new PeriodicTask('sealing', config.LEDGER_SEAL_INTERVAL_MS, () => this.seal(false), this.log).haltOn(phase?.signal);
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
    const startedMs = performance.now();
    const first = this.frontier.startSeq(startedMs, full);
    if (first === 0) this.stops.fullScanStarted();
    let start = first;
    for (;;) {
      const batch = await this.sealBatch(start);
      if (batch === null) return total; // another replica is sealing
      this.frontier.sealed(batch.sealed, performance.now(), batch.ceiling);
      total += batch.sealed.length;
      // Rows read, not rows sealed: a batch of events waiting behind a stop seals nothing, and the rest still need a pass.
      if (!batch.more) {
        if (first === 0) {
          this.frontier.fullScanDone(startedMs);
          for (const [orgId, stop] of this.stops.fullScanDone()) {
            this.log.log(`ledger chain of org ${orgId} resumes: event ${stop.eventId} (seq ${stop.seq}) is gone`);
          }
        }
        this.metrics?.ledgerChainsStopped.set(this.stops.size);
        return total;
      }
      start = batch.lastSeq + 1;
    }
  }

  /** Seals the next batch from `start`, or answers null when another replica holds the lock. */
  private async sealBatch(start: number): Promise<BatchResult | null> {
    return this.ds.transaction(async (m) => {
      const [{ locked }] = (await m.query('SELECT pg_try_advisory_xact_lock($1) AS locked', [SEALER_LOCK_KEY])) as [{ locked: boolean }];
      if (!locked) return null;
      const rows = (await m.query(
        storedBytesPage(
          `SELECT seq, id, org_id, type, run_id, tool_call_id, actor, metadata, ${CREATED_ISO_SQL} AS created_iso
             FROM runtime_ledger_events WHERE hash IS NULL AND seq >= $1 ORDER BY seq LIMIT ${BATCH}`,
          'seq',
        ),
        [start],
      )) as (UnsealedRow & SizedRow)[];
      if (rows.length === 0) return { sealed: [], read: 0, more: false, lastSeq: start, ceiling: 0 };
      // Read after the rows: every seq the sequence handed out to one of them is at most this. A row
      // above it named its own seq (an insert around the gateway), and must not move the frontier.
      const ceiling = await this.readCeiling(m);
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
      // The head's position exactly (pg hands a bigint over as text): see MAX_CHAIN_SEQ.
      const head = new Map(heads.map((h) => [h.org_id, { seq: BigInt(h.chain_seq), hash: h.hash }]));
      const seqs: string[] = [];
      const chainSeqs: number[] = [];
      const prevs: string[] = [];
      const hashes: string[] = [];
      for (const r of rows) {
        if (this.stops.waits(r.org_id, Number(r.seq))) continue;
        const h = head.get(r.org_id) ?? { seq: 0n, hash: GENESIS_HASH };
        if (h.seq >= MAX_CHAIN_SEQ) {
          // Ids and the position only, as for an event that cannot be hashed.
          if (this.stops.stop(r.org_id, Number(r.seq), r.id)) {
            this.log.warn(
              `ledger chain of org ${r.org_id} stopped at event ${r.id} (seq ${r.seq}): the org's chain already reaches position ${h.seq}, ` +
                `the last a chain can hold is ${MAX_CHAIN_SEQ} (a row written there around the gateway); the org's later events wait until it is removed`,
            );
          }
          continue;
        }
        const next = h.seq + 1n;
        const chainSeq = Number(next);
        const hash = eventHashOrNull(h.hash, {
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
        if (hash === null) {
          // Ids only: the row's content is what is wrong with it, and may be anything.
          if (this.stops.stop(r.org_id, Number(r.seq), r.id)) {
            this.log.warn(`ledger chain of org ${r.org_id} stopped at event ${r.id} (seq ${r.seq}): it cannot be hashed; the org's later events wait until it is removed`);
          }
          continue;
        }
        seqs.push(r.seq);
        chainSeqs.push(chainSeq);
        prevs.push(h.hash);
        hashes.push(hash);
        head.set(r.org_id, { seq: next, hash });
      }
      const read = { read: rows.length, more: morePages(rows, BATCH), lastSeq: Number(rows[rows.length - 1].seq), ceiling };
      if (seqs.length === 0) return { sealed: [], ...read };
      await m.query(
        `UPDATE runtime_ledger_events e SET chain_seq = v.chain_seq, prev_hash = v.prev_hash, hash = v.hash, sealed_at = clock_timestamp()
           FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS v(seq, chain_seq, prev_hash, hash)
          WHERE e.seq = v.seq`,
        [seqs, chainSeqs, prevs, hashes],
      );
      return { sealed: seqs.map(Number), ...read };
    });
  }

  /**
   * The last seq the sequence handed out, through ledger_seq_ceiling() (SECURITY DEFINER: the gateway's role
   * may hold table privileges only, and reading the sequence needs its own). A role refused even that
   * (EXECUTE revoked), or a function that no longer works (made by hand, or by an old release, naming what is gone),
   * seals with no ceiling, as before the ceiling existed, rather than not at all; inside a savepoint, so the refusal
   * leaves the batch's transaction usable.
   */
  private async readCeiling(m: EntityManager): Promise<number> {
    await m.query('SAVEPOINT ledger_seq_ceiling');
    try {
      const [{ ceiling }] = (await m.query('SELECT ledger_seq_ceiling() AS ceiling')) as [{ ceiling: string | null }];
      await m.query('RELEASE SAVEPOINT ledger_seq_ceiling');
      this.ceilingRefused = false;
      return Number(ceiling ?? 0);
    } catch (err) {
      if (!ceilingUnusable(err)) throw err;
      await m.query('ROLLBACK TO SAVEPOINT ledger_seq_ceiling');
      if (!this.ceilingRefused) {
        this.log.warn(`sealing without a ceiling: ${loggableErrorText(err)}; an event inserted with an explicit seq can hold back the sealing of later ones until the next full scan`);
        this.ceilingRefused = true;
      }
      return Number.POSITIVE_INFINITY;
    }
  }
}
