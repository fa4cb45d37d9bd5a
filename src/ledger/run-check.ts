import { NIL_UUID } from '../common/ids.js';
import { manifestDigest, manifestTools } from '../runs/run-manifest.js';
import { sizedPageSql, morePages, type SizedRow } from '../db/sized-page.js';
import { FIRST_IN_CHAIN_ORDER, isoSql, PAGE_STORED_BYTES } from './ledger-chain.js';
import { firstEventWithoutRow } from './row-less-events.js';
import type { ChainReader, VerifyBreak } from './ledger-verifier.service.js';
import { REQUESTED_LAG_MAX_MS } from './tool-call-check.js';

const PAGE = 5_000;

/** The statuses of a run that has not ended (RunsService.endRun moves it out of them, once). */
const LIVE: ReadonlySet<string> = new Set(['running', 'waiting_approval']);
/** A run's end event for each status it ends in. */
const END_EVENT: Readonly<Record<string, string>> = { completed: 'run.completed', cancelled: 'run.cancelled' };

/** One run.* event of a run, as the check reads it. */
export interface RunEvent {
  id: string;
  chainSeq: number | null;
  type: string;
  specialistId: string | null;
  allowedToolCount: unknown;
  manifestDigest: string | null;
  hasManifestDigest: boolean;
  reasonGiven: unknown;
  reasonDigest: string | null;
  hasReasonDigest: boolean;
  actorKeyId: string | null;
  actorRole: string | null;
  /** Milliseconds from the row's created_at to this event's (run.created is written in the row's statement); null when either is not finite. */
  lagMs: number | null;
  /** The event's created_at (microseconds, UTC). */
  createdIso: string;
}

export interface RunRow extends SizedRow {
  id: string;
  status: string;
  specialist_id: string;
  created_by: string | null;
  created_iso: string;
  /** The row's metadata.runtimeManifest alone (the rest may hold 16 KB of the agent's own): read as the gateway reads it (manifestTools). */
  manifest: unknown;
  has_ended: boolean;
  /** metadata.ended.at as stored (text; an edited row may hold anything). */
  ended_at: string | null;
  /** The SHA-256 (hex) of metadata.ended.reason; null when it has none. */
  ended_reason_digest: string | null;
  ended_by_key: string | null;
  ended_by_role: string | null;
  has_ended_by: boolean;
  events: RunEvent[] | null;
}

/**
 * Runs against their events, for chain verification. The gateway acts on the agent_runs row, which is not chained:
 * its manifest decides which tools a call of the run may use (a snapshot of the permissions when it was created), its
 * status whether a call is taken at all, its created_by which agent key reaches it. So a write action added to a
 * manifest, a cancelled run set running again, or a run handed to another agent key by an UPDATE with no event left
 * every chain intact and verify ok. RunsService.create writes the row and its run.created event in one statement,
 * and RunsService.endRun the status, the end (metadata.ended) and its run.completed or run.cancelled event, both since
 * the first release. The first run (oldest first) that disagrees with its events, or whose events have no row, is a
 * break. The run's events are read through ledger_events_run_idx, which holds its calls' events too: at most one
 * read of the org's events, as the chain's walk is.
 */
export async function firstRunOffLedger(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  return (await firstRunOffEvents(db, orgId)) ?? (await firstEventWithoutRow(db, orgId, { type: 'run.created', idColumn: 'run_id', table: 'agent_runs', what: 'run' }));
}

async function firstRunOffEvents(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  for (let after = { iso: '-infinity', id: NIL_UUID }; ;) {
    const page = `SELECT r.id, r.status, r.specialist_id, r.created_by, r.created_at, ${isoSql('r.created_at')} AS created_iso,
              r.metadata->'runtimeManifest' AS manifest, r.metadata ? 'ended' AS has_ended, r.metadata->'ended'->>'at' AS ended_at,
              encode(sha256(convert_to(r.metadata->'ended'->>'reason', 'UTF8')), 'hex') AS ended_reason_digest,
              r.metadata->'ended'->'by'->>'keyId' AS ended_by_key, r.metadata->'ended'->'by'->>'role' AS ended_by_role,
              coalesce(r.metadata->'ended' ? 'by', false) AS has_ended_by, e.events
         FROM agent_runs r
         LEFT JOIN LATERAL (
           SELECT jsonb_agg(jsonb_build_object(
                    'id', e.id, 'chainSeq', e.chain_seq, 'type', e.type,
                    'specialistId', e.metadata->>'specialistId', 'allowedToolCount', e.metadata->'allowedToolCount',
                    'manifestDigest', e.metadata->>'manifestDigest', 'hasManifestDigest', e.metadata ? 'manifestDigest',
                    'reasonGiven', e.metadata->'reasonGiven',
                    'reasonDigest', e.metadata->>'reasonDigest', 'hasReasonDigest', e.metadata ? 'reasonDigest',
                    'actorKeyId', e.actor->>'keyId', 'actorRole', e.actor->>'role',
                    'createdIso', ${isoSql('e.created_at')},
                    'lagMs', CASE WHEN isfinite(r.created_at) AND isfinite(e.created_at) THEN extract(epoch FROM e.created_at - r.created_at) * 1000 END)
                  ORDER BY ${FIRST_IN_CHAIN_ORDER('e')}) AS events
             FROM runtime_ledger_events e
            WHERE e.run_id = r.id AND e.org_id = r.org_id AND e.type IN ('run.created', 'run.completed', 'run.cancelled')) e ON true
        WHERE r.org_id = $1 AND (r.created_at, r.id) > ($2::timestamptz, $3::uuid)
        ORDER BY r.created_at, r.id LIMIT ${PAGE}`;
    // Cut by bytes too, as the text the page sends: a manifest may list a thousand tools.
    const rows = (await db.query(sizedPageSql(page, 'coalesce(octet_length(manifest::text), 0)', String(PAGE_STORED_BYTES), 'created_at, id'), [
      orgId,
      after.iso,
      after.id,
    ])) as RunRow[];
    for (const r of rows) {
      const off = runMismatch(r);
      if (off) return { chainSeq: Number(off.at?.chainSeq ?? 0), eventId: off.at?.id ?? null, reason: off.reason };
    }
    if (!morePages(rows, PAGE)) return null;
    const last = rows[rows.length - 1];
    after = { iso: last.created_iso, id: last.id };
  }
}

export interface RunMismatch {
  at: RunEvent | null;
  reason: string;
}

/**
 * Why a run row disagrees with its events, or null: one run.created first, then at most one end; its specialist, its
 * creator and its manifest as run.created recorded them (the manifest by `manifestDigest`, else, on events from before
 * it was recorded, by `allowedToolCount`), its creation time that event's; its status ended exactly when an end event
 * is on the ledger, as that event's type, and the end kept on the row (who ended it, when, and why by `reasonDigest`,
 * else `reasonGiven`) the event's. Ids and known values only in the reason: an edited row may hold anything.
 */
export function runMismatch(r: RunRow): RunMismatch | null {
  const events = r.events ?? [];
  const created = events[0];
  if (!created || created.type !== 'run.created') return { at: created ?? null, reason: `run ${r.id} has no run.created event on the ledger` };
  const ends = events.slice(1);
  if (ends.some((e) => e.type === 'run.created')) return { at: ends.find((e) => e.type === 'run.created')!, reason: `run ${r.id} has more than one run.created event` };
  if (ends.length > 1) return { at: ends[1], reason: `run ${r.id} has more than one end event` };
  if (created.specialistId !== r.specialist_id) return { at: created, reason: `run ${r.id}: its specialist differs from the one its run.created event recorded` };
  if (created.actorKeyId !== null && r.created_by !== created.actorKeyId) return { at: created, reason: `run ${r.id}: the key that created it differs from its run.created event's` };
  const tools = manifestTools({ runtimeManifest: r.manifest });
  const sameManifest = created.hasManifestDigest
    ? manifestDigest(tools) === created.manifestDigest
    : typeof created.allowedToolCount !== 'number' || tools.length === created.allowedToolCount;
  if (!sameManifest) return { at: created, reason: `run ${r.id}: its manifest differs from the one its run.created event recorded (${created.hasManifestDigest ? 'manifestDigest' : 'allowedToolCount'})` };
  if (!(created.lagMs !== null && created.lagMs >= 0 && created.lagMs <= REQUESTED_LAG_MAX_MS)) return { at: created, reason: `run ${r.id}: its creation time differs from its run.created event's` };
  const end = ends[0];
  const live = LIVE.has(r.status);
  if (!end) return live ? null : { at: null, reason: `run ${r.id} is ${endedStatus(r.status)}, but no end event on the ledger ended it` };
  if (live) return { at: end, reason: `run ${r.id} is ${r.status}, but ${end.type === 'run.completed' ? 'run.completed' : 'run.cancelled'} on the ledger ended it` };
  if (END_EVENT[r.status] !== end.type) return { at: end, reason: `run ${r.id} is ${endedStatus(r.status)}, but its end event is ${end.type}` };
  // Ends recorded with a reasonDigest (this release on) always kept who ended it and when, in the end's statement: the
  // batches rejecting the rest of its approvals decide them as `by`, and GET /v1/runs/:id shows `at`.
  const current = end.hasReasonDigest;
  if ((current || r.has_ended_by) && (!r.has_ended_by || r.ended_by_key !== end.actorKeyId || r.ended_by_role !== end.actorRole)) {
    return { at: end, reason: `run ${r.id}: who ended it differs from its end event's actor` };
  }
  if (current && !endedJustBefore(r.ended_at, end.createdIso)) return { at: end, reason: `run ${r.id}: the time it ended differs from its end event's` };
  const sameReason = end.hasReasonDigest
    ? r.has_ended && r.ended_reason_digest === end.reasonDigest
    : typeof end.reasonGiven !== 'boolean' || (r.ended_reason_digest !== null) === end.reasonGiven;
  if (!sameReason) return { at: end, reason: `run ${r.id}: its end reason differs from the one its end event recorded (${end.hasReasonDigest ? 'reasonDigest' : 'reasonGiven'})` };
  return null;
}

/**
 * Whether the end's time kept on the row (clock_timestamp() in the end's UPDATE) comes before its event's (the same
 * statement's INSERT, after it), by less than a statement could take. Parsed here: the text of an edited row may be
 * anything, and cast in SQL it would fail the whole verify.
 */
function endedJustBefore(endedAt: string | null, eventIso: string): boolean {
  const at = endedAt === null ? Number.NaN : Date.parse(endedAt);
  const lag = Date.parse(eventIso) - at;
  return lag >= 0 && lag <= REQUESTED_LAG_MAX_MS;
}

/** A status for a reason: the row's CHECK constraint allows only the gateway's, but name only those. */
const endedStatus = (status: string): string => (Object.hasOwn(END_EVENT, status) ? status : 'ended');
