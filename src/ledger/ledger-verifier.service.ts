import { Injectable, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { morePages, type SizedRow } from '../db/sized-page.js';
import { CREATED_ISO_SQL, eventHashOrNull, GENESIS_HASH, MAX_CHAIN_SEQ, storedBytesPage, type ChainedEventFields } from './ledger-chain.js';
import { LedgerSealerService } from './ledger-sealer.service.js';
import { SharedRuns } from './shared-runs.js';
import { firstCallOffLedger } from './tool-call-check.js';
import { firstRunOffLedger } from './run-check.js';
import { credentialOpener, firstCredentialOffLedger, type CredentialOpener } from './credential-check.js';
import { firstConfigOffLedger } from './config-check.js';
import { EnvelopeCipher } from '../common/crypto/envelope-cipher.js';

export interface VerifyBreak {
  chainSeq: number;
  eventId: string | null;
  reason: string;
}

export type VerifyResult = { ok: true; checked: number; headHash: string | null } | { ok: false; checked: number; brokenAt: VerifyBreak };

const PAGE = 5_000;
const MIN_BIGINT = '-9223372036854775808';

/** Anything that runs a parameterised query: a DataSource, an EntityManager, a pg client wrapper. */
export interface ChainReader {
  query(sql: string, params: unknown[]): Promise<unknown>;
}

const EVENT_COLUMNS = `seq, id, org_id, chain_seq, type, run_id, tool_call_id, actor, metadata, prev_hash, hash, ${CREATED_ISO_SQL} AS created_iso`;

interface EventRow extends SizedRow {
  seq: string; id: string; org_id: string; chain_seq: string | null; type: string; run_id: string | null; tool_call_id: string | null;
  actor: unknown; metadata: unknown; prev_hash: string | null; hash: string | null; created_iso: string | null;
}

const hashed = (r: EventRow, chainSeq: number): ChainedEventFields => ({
  id: r.id, orgId: r.org_id, chainSeq, type: r.type, runId: r.run_id, toolCallId: r.tool_call_id,
  actor: r.actor, metadata: r.metadata, createdIso: r.created_iso,
});

/**
 * Recomputes an org's sealed hash chain from the stored events, page by page,
 * and reports the first position where it breaks (a changed, missing or
 * reordered event); then that every tool call of the org agrees with its
 * events, its live credentials rows with their last credentials events, and its feature flags, tool permissions,
 * policy and API keys with the events that set them (config-check.ts). Pure of Nest, so the ledger:verify CLI runs the same code.
 */
export async function verifyOrgChain(db: ChainReader, orgId: string, openCredentials?: CredentialOpener): Promise<VerifyResult> {
  let prev = GENESIS_HASH;
  let expected = 1;
  let checked = 0;
  for (;;) {
    const rows = (await db.query(
      storedBytesPage(`SELECT ${EVENT_COLUMNS} FROM runtime_ledger_events WHERE org_id = $1 AND chain_seq >= $2 ORDER BY chain_seq LIMIT ${PAGE}`, 'chain_seq'),
      [orgId, expected],
    )) as EventRow[];
    for (const r of rows) {
      const chainSeq = Number(r.chain_seq);
      if (chainSeq !== expected) {
        // A row written around the gateway at the last position a chain can hold or past it (MAX_CHAIN_SEQ,
        // 2^53 - 1) is where the sealer stopped the org's chain: named, with its position as stored (as a JS
        // number it would be rounded), rather than left for the reader to find behind "missing".
        if (BigInt(r.chain_seq!) >= MAX_CHAIN_SEQ) {
          return {
            ok: false,
            checked,
            brokenAt: {
              chainSeq: expected,
              eventId: r.id,
              reason: `event missing from the chain: the next sealed event sits at position ${r.chain_seq}, the last a chain can hold (${MAX_CHAIN_SEQ}) or past it; the org's later events wait behind it`,
            },
          };
        }
        return { ok: false, checked, brokenAt: { chainSeq: expected, eventId: null, reason: 'event missing from the chain' } };
      }
      if (r.prev_hash !== prev) {
        return { ok: false, checked, brokenAt: { chainSeq, eventId: r.id, reason: 'prev_hash does not match the previous event' } };
      }
      const hash = eventHashOrNull(prev, hashed(r, chainSeq));
      if (hash === null) {
        return { ok: false, checked, brokenAt: { chainSeq, eventId: r.id, reason: 'event cannot be hashed (a value with no canonical JSON form)' } };
      }
      if (hash !== r.hash) {
        return { ok: false, checked, brokenAt: { chainSeq, eventId: r.id, reason: 'event content does not match its hash' } };
      }
      prev = hash;
      expected++;
      checked++;
    }
    if (!morePages(rows, PAGE)) break;
  }
  const off = await firstOffChain(db, orgId);
  if (off) return { ok: false, checked, brokenAt: { chainSeq: 0, ...off } };
  const call = await firstCallOffLedger(db, orgId);
  if (call) return { ok: false, checked, brokenAt: call };
  const run = await firstRunOffLedger(db, orgId);
  if (run) return { ok: false, checked, brokenAt: run };
  const credentials = await firstCredentialOffLedger(db, orgId, openCredentials);
  if (credentials) return { ok: false, checked, brokenAt: credentials };
  const config = await firstConfigOffLedger(db, orgId);
  if (config) return { ok: false, checked, brokenAt: config };
  return { ok: true, checked, headHash: checked ? prev : null };
}

/**
 * Rows the walk above cannot see, which the sealer never produces: sealed-looking rows off the
 * chain (a hash or link without a position, a position below 1), which would still show in
 * listings and a call's history, unsealed rows the sealer cannot hash, where it stops the
 * org's chain, and unsealed rows below seq 0, which it never reads (it reads from 0 up).
 * Only a write around the gateway makes them. (A row with a position but no hash or
 * link breaks the walk.) The predicate names positions only, so the planner reads the org's
 * off-chain rows from ledger_events_chain_uq; `(chain_seq IS NULL) <> (hash IS NULL)` could not
 * be estimated and made it walk every org's events in seq order.
 */
async function firstOffChain(db: ChainReader, orgId: string): Promise<{ eventId: string; reason: string } | null> {
  // From the lowest bigint, inclusive: a seq below 0 (OVERRIDING SYSTEM VALUE, refused since migration 1765200000000) is read too.
  for (let after = MIN_BIGINT, op = '>='; ; op = '>') {
    const rows = (await db.query(
      storedBytesPage(
        `SELECT ${EVENT_COLUMNS} FROM runtime_ledger_events
          WHERE org_id = $1 AND (chain_seq IS NULL OR chain_seq < 1) AND seq ${op} $2 ORDER BY seq LIMIT ${PAGE}`,
        'seq',
      ),
      [orgId, after],
    )) as EventRow[];
    for (const r of rows) {
      if (r.chain_seq !== null || r.hash !== null || r.prev_hash !== null) return { eventId: r.id, reason: 'event outside the chain' };
      if (BigInt(r.seq) < 0n) return { eventId: r.id, reason: 'unsealed event below seq 0, where the sealer never reads; it stays outside the chain' };
      // Whether a row has a hash does not depend on where it would go in the chain.
      if (eventHashOrNull(GENESIS_HASH, hashed(r, 0)) === null) {
        return { eventId: r.id, reason: 'unsealed event cannot be hashed (a value with no canonical JSON form); later events of the org wait behind it' };
      }
    }
    if (!morePages(rows, PAGE)) return null;
    after = rows[rows.length - 1].seq;
  }
}

/** A position of the chain and the hash the caller kept for it from an earlier verify (`checked`, `headHash`). */
export interface ChainAnchor {
  chainSeq: number;
  hash: string;
}

/**
 * `<chainSeq>:<hash>`, as the API's `anchor` and the CLI's `--anchor` take it. At most 15 digits: every such position
 * is read exactly (below MAX_CHAIN_SEQ, 2^53 - 1); a 16th let 9007199254740993 be read, and answered, as ...992.
 */
export const ANCHOR_FORMAT = /^([1-9]\d{0,14}):([0-9a-f]{64})$/;

export function parseAnchor(text: string): ChainAnchor | null {
  const m = ANCHOR_FORMAT.exec(text);
  return m ? { chainSeq: Number(m[1]), hash: m[2]! } : null;
}

/**
 * An intact chain against a position and hash the caller kept outside the database: the walk recomputed every hash
 * from the first event, so the stored hash at that position is the chain's own. A chain that now ends before it had
 * events cut from its end; another hash there is a chain rewritten at or before that position and sealed again (by
 * someone who could get past the append-only trigger: the sealer chains whatever is unsealed). A broken chain is
 * answered as it is.
 */
export async function checkAnchor(db: ChainReader, orgId: string, result: VerifyResult, anchor: ChainAnchor | undefined): Promise<VerifyResult> {
  if (!anchor || !result.ok) return result;
  if (result.checked < anchor.chainSeq) {
    return { ok: false, checked: result.checked, brokenAt: { chainSeq: anchor.chainSeq, eventId: null, reason: `the chain ends at ${result.checked}, before the anchor at ${anchor.chainSeq}: events were cut from its end` } };
  }
  const [row] = (await db.query('SELECT id, hash FROM runtime_ledger_events WHERE org_id = $1 AND chain_seq = $2', [orgId, anchor.chainSeq])) as { id: string; hash: string | null }[];
  if (row?.hash === anchor.hash) return result;
  return {
    ok: false,
    checked: result.checked,
    brokenAt: { chainSeq: anchor.chainSeq, eventId: row?.id ?? null, reason: 'the event at the anchor is not the one anchored: the chain was rewritten at or before it and sealed again' },
  };
}

/** How many verifies walk a chain at once in a process (across orgs); more wait their turn. */
export const VERIFY_CONCURRENCY = 2;

/**
 * Seals what is committed, then recomputes an org's hash chain. A walk is CPU on
 * the event loop for every event of the org, so concurrent requests for one org
 * share one run (a request arriving while it runs gets its answer, which covers
 * what was committed when that run began), and at most VERIFY_CONCURRENCY orgs'
 * run at once.
 */
@Injectable()
export class LedgerVerifierService {
  private readonly log = new Logger('LedgerVerifier');
  private readonly runs = new SharedRuns<VerifyResult>(VERIFY_CONCURRENCY);

  private readonly openCredentials: CredentialOpener;

  constructor(
    private readonly ds: DataSource,
    private readonly sealer: LedgerSealerService,
    cipher: EnvelopeCipher,
  ) {
    this.openCredentials = credentialOpener(cipher);
  }

  /** With an anchor, the intact chain is also held to it (checkAnchor): concurrent verifies still share one walk. */
  async verify(orgId: string, anchor?: ChainAnchor): Promise<VerifyResult> {
    const walked = await this.runs.run(orgId, () => this.sealAndWalk(orgId));
    const result = await checkAnchor(this.ds, orgId, walked, anchor);
    if (result !== walked && !result.ok) this.log.error({ orgId, checked: result.checked, brokenAt: result.brokenAt }, 'ledger chain broken');
    return result;
  }

  private async sealAndWalk(orgId: string): Promise<VerifyResult> {
    // Sealing first makes the answer cover everything committed. When a pass fails, what is sealed
    // can still be checked (read-only): an auditor asking is when an answer matters most.
    await this.sealer.sealNow().catch((err: unknown) => {
      this.log.warn(`sealing before verify failed, verifying what is sealed: ${loggableErrorText(err)}`);
    });
    const result = await verifyOrgChain(this.ds, orgId, this.openCredentials);
    // Said where a SIEM looks, not only to whoever asked: a broken chain is tampering, or a bug to find at once. Ids,
    // a position and a fixed reason only.
    if (!result.ok) this.log.error({ orgId, checked: result.checked, brokenAt: result.brokenAt }, 'ledger chain broken');
    return result;
  }
}
