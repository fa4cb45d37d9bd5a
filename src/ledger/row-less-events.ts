import { CREATED_ISO_SQL } from './ledger-chain.js';
import type { ChainReader, VerifyBreak } from './ledger-verifier.service.js';

const PAGE = 5_000;

/** An event that opens a row's trail, the row it names, and what the row is called in a break's reason. */
export interface OpeningEvent {
  type: 'tool_call.requested' | 'run.created';
  idColumn: 'tool_call_id' | 'run_id';
  table: 'tool_calls' | 'agent_runs';
  what: 'tool call' | 'run';
}

/**
 * The org's first opening event (oldest first) whose row is not the org's: a DELETE of the row the views read, or (a
 * run) one moved to another org. The row is looked up by its key, an event at a time (a subquery with a LIMIT, which the
 * planner keeps as one): as an EXISTS, the planner hashed every org's runs for an org with one.
 */
export async function firstEventWithoutRow(db: ChainReader, orgId: string, opening: OpeningEvent): Promise<VerifyBreak | null> {
  for (let after = { iso: '-infinity', seq: '0' }; ;) {
    const rows = (await db.query(
      `SELECT e.id, e.seq, e.chain_seq, e.${opening.idColumn} AS row_id, ${CREATED_ISO_SQL} AS created_iso,
              (SELECT true FROM ${opening.table} r WHERE r.id = e.${opening.idColumn} AND r.org_id = e.org_id LIMIT 1) IS NOT NULL AS has_row
         FROM runtime_ledger_events e
        WHERE e.org_id = $1 AND e.type = $4 AND (e.created_at, e.seq) > ($2::timestamptz, $3::bigint)
        ORDER BY e.created_at, e.seq LIMIT ${PAGE}`,
      [orgId, after.iso, after.seq, opening.type],
    )) as { id: string; seq: string; chain_seq: string | null; row_id: string | null; created_iso: string; has_row: boolean }[];
    for (const r of rows) {
      if (!r.has_row) return { chainSeq: Number(r.chain_seq ?? 0), eventId: r.id, reason: `${opening.what} ${r.row_id ?? '(none)'} has events in the ledger but no row` };
    }
    if (rows.length < PAGE) return null;
    const last = rows[rows.length - 1];
    after = { iso: last.created_iso, seq: last.seq };
  }
}
