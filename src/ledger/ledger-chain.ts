import { CanonicalJsonError, canonicalJson, sha256Hex } from '../common/canonical-json.js';
import { sizedPageSql } from '../db/sized-page.js';

/** The fields of an event that its hash covers, in the form both sealer and verifier read them. */
export interface ChainedEventFields {
  id: string;
  orgId: string;
  chainSeq: number;
  type: string;
  runId: string | null;
  toolCallId: string | null;
  actor: unknown;
  metadata: unknown;
  /** created_at as text with microseconds, UTC, ' BC' after a date before 1 AD (see isoSql); null for ±infinity, which has no such text */
  createdIso: string | null;
}

export const GENESIS_HASH = '0'.repeat(64);

/**
 * The last chain position the sealer hands out (LedgerSealerService): 2^53 - 1, the last integer a JSON number (and so the chainSeq an
 * event's hash covers, the verifier's walk, the listing's chainSeq) holds exactly. An org's head is its highest
 * chain_seq, whatever row holds it, and any row may be INSERTed sealed-looking around the gateway (the append-only
 * table takes inserts). The head was read into a JS number and the next position taken as head + 1: a row at
 * 9223372036854775807 made that 2^63, out of bigint's range, and one at 2^53 made it 2^53 again, the same position
 * (a unique violation); either way the batch's one UPDATE failed, and a batch holds every org's unsealed events, so
 * sealing stopped for every org on every pass. Now the head is read exactly (a bigint), and an org whose chain
 * already reaches this position has its chain stopped there (ChainStops), as for an event that cannot be hashed:
 * its verify reports the break (the positions the forged row skipped are missing), every other org goes on.
 */
export const MAX_CHAIN_SEQ = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * Exact text of a timestamptz column, UTC with microseconds (it reads back as the same instant). 'YYYY' has no era,
 * and PostgreSQL takes BC dates (the finite-time CHECKs allow them): 2026-01-05 BC printed as 2026-01-05 AD, so an
 * event moved to BC kept its hash, and a keyset position at a BC row read back in AD made a page skip, or start
 * again from, every row after it. A date before 1 AD ends in ' BC', which ::timestamptz reads back; AD text is as
 * before, so every hash sealed over it still holds.
 */
export const isoSql = (column: string): string =>
  `(to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    || CASE WHEN ${column} < '0001-01-01T00:00:00Z'::timestamptz THEN ' BC' ELSE '' END)`;

/** Exact text of created_at, so the hash does not depend on JS Date's millisecond rounding. */
export const CREATED_ISO_SQL = isoSql('created_at');

export function eventHash(prevHash: string, e: ChainedEventFields): string {
  return sha256Hex(
    canonicalJson({
      prevHash,
      chainSeq: e.chainSeq,
      id: e.id,
      orgId: e.orgId,
      type: e.type,
      runId: e.runId,
      toolCallId: e.toolCallId,
      actor: e.actor ?? null,
      metadata: e.metadata ?? {},
      createdAt: e.createdIso,
    }),
  );
}

/**
 * eventHash, or null for an event that has no canonical JSON form: jsonb keeps numbers past the
 * double range (`1e400`), which JSON.parse reads as Infinity, and arrays and objects nested
 * deeper than MAX_CANONICAL_DEPTH (thousands deep, canonicalJson ran out of stack and the
 * RangeError failed every org's sealing pass); created_at can be ±infinity, which
 * has no text (CREATED_ISO_SQL gives NULL; since migration 1765200000000 a CHECK refuses it, but
 * rows from before remain). The gateway never writes either; an insert around it can. Sealer and
 * verifier report such an event instead of failing every org's work. (Hashing a null createdAt
 * sealed it, so verify said intact while listing it failed.)
 */
export function eventHashOrNull(prevHash: string, e: ChainedEventFields): string | null {
  if (e.createdIso === null) return null;
  try {
    return eventHash(prevHash, e);
  } catch (err) {
    if (err instanceof CanonicalJsonError) return null;
    throw err;
  }
}

/** What one page of events may hold, as stored (pg_column_size: compressed; the JSON text is some 1–3 times more). */
export const PAGE_STORED_BYTES = 4 * 1024 * 1024;

/**
 * `page`, a query for at most a page of events in `order` (it has its LIMIT), cut after the event that reaches
 * PAGE_STORED_BYTES of actor and metadata as stored (sizedPageSql): the sealer and the verifier parse and hash a page
 * in one go, and an org admin can make every event some 120 KB (a whole permissions diff), so 5,000 of them were
 * 600 MB of JSON held at once and 8 s of the event loop, every org's calls waiting. morePages says whether more follow.
 */
export const storedBytesPage = (page: string, order: string): string =>
  sizedPageSql(page, 'coalesce(pg_column_size(metadata), 0) + coalesce(pg_column_size(actor), 0)', String(PAGE_STORED_BYTES), order);

/**
 * The order of an org's events as the chain holds them, for verify's "last event of …" and a trail's order: sealed
 * events by their chain position, then the unsealed (which verify's sealing could not seal: later) by seq. Not seq
 * alone: the hash covers the position, not seq, so a row deleted and put back as it was under a higher seq (by the
 * table's owner, past the append-only trigger: OVERRIDING SYSTEM VALUE) kept its place in the chain, verify with an
 * anchor said intact, and yet it became the flag's (credentials', key's) last event, a reverted setting agreeing.
 */
const UNSEALED_LAST = '9223372036854775807';
export const FIRST_IN_CHAIN_ORDER = (e: string): string => `coalesce(${e}.chain_seq, ${UNSEALED_LAST}), ${e}.seq`;
export const LAST_IN_CHAIN_ORDER = (e: string): string => `coalesce(${e}.chain_seq, ${UNSEALED_LAST}) DESC, ${e}.seq DESC`;
/** Whether event `a` comes after event `b` in that order. */
export const AFTER_IN_CHAIN_ORDER = (a: string, b: string): string =>
  `(coalesce(${a}.chain_seq, ${UNSEALED_LAST}), ${a}.seq) > (coalesce(${b}.chain_seq, ${UNSEALED_LAST}), ${b}.seq)`;
