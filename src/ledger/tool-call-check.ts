import { NIL_UUID } from '../common/ids.js';
import { CREATED_ISO_SQL, isoSql } from './ledger-chain.js';
import type { ChainReader, VerifyBreak } from './ledger-verifier.service.js';

const PAGE = 5_000;

/**
 * Tool calls against their events, for chain verification. Ops views, exports,
 * usage and replays read the tool_calls row, which is not chained: an UPDATE of
 * it (failed → succeeded) or a DELETE, plain SQL within the app role's rights,
 * left every chain intact and verify ok. The first call (oldest first) whose row
 * disagrees with its events, or whose events have no row, is a break.
 */
export async function firstCallOffLedger(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  return (await firstCallOffEvents(db, orgId)) ?? (await firstDeletedCall(db, orgId));
}

/** The statuses a call ends in, each recorded by an event of the same name (or a reconcile). */
const SETTLED = new Set(['blocked', 'succeeded', 'failed', 'indeterminate']);
/** The events that settle a call; its last one says how it ended. (tool_call.outcome_after_sweep only reports.) */
const SETTLING_EVENTS = [...[...SETTLED].map((s) => `tool_call.${s}`), 'tool_call.reconciled'];

interface CallRow {
  id: string; status: string; error_code: string | null; action_digest: string; created_iso: string;
  event_id: string | null; event_chain_seq: string | null; event_type: string | null; event_to: string | null;
  event_error_code: string | null; event_digest: string | null; note_digest: string | null; event_note_digest: string | null;
}

/**
 * The org's first call whose row disagrees with its events: a settled call's last settling event
 * must agree on status, error code and action digest (and a reconciled call's note on its digest,
 * when the event has one: events from before it was recorded do not); a call not settled must have none. Row and
 * events are read in one statement, as the gateway writes a call's status and its event in one: a
 * call settling meanwhile is never half seen. (A forged event INSERTed to match an edit still
 * passes: inserting is what an append-only ledger allows.)
 */
async function firstCallOffEvents(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  for (let after = { iso: '-infinity', id: NIL_UUID }; ;) {
    const rows = (await db.query(
      `SELECT t.id, t.status, t.error_code, t.action_digest, ${isoSql('t.created_at')} AS created_iso,
              e.id AS event_id, e.chain_seq AS event_chain_seq, e.type AS event_type, e.metadata->>'to' AS event_to,
              e.metadata->>'errorCode' AS event_error_code, e.metadata->>'digest' AS event_digest,
              e.metadata->>'noteDigest' AS event_note_digest,
              CASE WHEN e.metadata ? 'noteDigest' THEN encode(sha256(convert_to(t.note, 'UTF8')), 'hex') END AS note_digest
         FROM tool_calls t
         LEFT JOIN LATERAL (SELECT e.id, e.chain_seq, e.type, e.metadata FROM runtime_ledger_events e
                             WHERE e.tool_call_id = t.id AND e.org_id = t.org_id AND e.type = ANY($4::text[])
                             ORDER BY e.seq DESC LIMIT 1) e ON true
        WHERE t.org_id = $1 AND (t.created_at, t.id) > ($2::timestamptz, $3::uuid)
        ORDER BY t.created_at, t.id LIMIT ${PAGE}`,
      [orgId, after.iso, after.id, SETTLING_EVENTS],
    )) as CallRow[];
    for (const r of rows) {
      const reason = callMismatch(r);
      if (reason) return { chainSeq: Number(r.event_chain_seq ?? 0), eventId: r.event_id, reason };
    }
    if (rows.length < PAGE) return null;
    const last = rows[rows.length - 1];
    after = { iso: last.created_iso, id: last.id };
  }
}

/** Why a call row disagrees with its last settling event, or null. Ids and known statuses only: an edited row may hold anything. */
function callMismatch(r: CallRow): string | null {
  const settled = SETTLED.has(r.status); // status itself is one of the CHECK constraint's
  if (r.event_type === null) return settled ? `tool call ${r.id} is ${r.status}, but no event in the ledger settled it` : null;
  const said = r.event_type === 'tool_call.reconciled' ? r.event_to : r.event_type.slice('tool_call.'.length);
  if (!settled || said !== r.status) {
    return `tool call ${r.id} is ${r.status}, but its last settling event says ${said !== null && SETTLED.has(said) ? said : 'otherwise'}`;
  }
  if (r.error_code !== r.event_error_code) return `tool call ${r.id}: its error code differs from its last settling event's`;
  if (r.action_digest !== r.event_digest) return `tool call ${r.id}: its action digest differs from its events'`;
  if (r.event_note_digest !== null && r.note_digest !== r.event_note_digest) return `tool call ${r.id}: its reconcile note differs from the one its event recorded`;
  return null;
}

/** The org's first call (oldest first) that has events but no row: a DELETE of the row the views read. */
async function firstDeletedCall(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  for (let after = { iso: '-infinity', seq: '0' }; ;) {
    const rows = (await db.query(
      `SELECT e.id, e.seq, e.chain_seq, e.tool_call_id, ${CREATED_ISO_SQL} AS created_iso,
              EXISTS (SELECT 1 FROM tool_calls t WHERE t.id = e.tool_call_id AND t.org_id = e.org_id) AS has_row
         FROM runtime_ledger_events e
        WHERE e.org_id = $1 AND e.type = 'tool_call.requested' AND (e.created_at, e.seq) > ($2::timestamptz, $3::bigint)
        ORDER BY e.created_at, e.seq LIMIT ${PAGE}`,
      [orgId, after.iso, after.seq],
    )) as { id: string; seq: string; chain_seq: string | null; tool_call_id: string | null; created_iso: string; has_row: boolean }[];
    for (const r of rows) {
      if (!r.has_row) return { chainSeq: Number(r.chain_seq ?? 0), eventId: r.id, reason: `tool call ${r.tool_call_id ?? '(none)'} has events in the ledger but no row` };
    }
    if (rows.length < PAGE) return null;
    const last = rows[rows.length - 1];
    after = { iso: last.created_iso, seq: last.seq };
  }
}
