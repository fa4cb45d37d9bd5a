import { newId } from '../common/ids.js';
import type { NewLedgerEvent } from '../ledger/ledger-events.service.js';

/**
 * Builds `INSERT INTO runtime_ledger_events … SELECT … WHERE EXISTS (SELECT 1 FROM <guard>)` for a CTE.
 * `sqlMetadata` adds facts only the statement knows to an event's metadata: a jsonb expression over its
 * parameters, merged in (the outcome's digest of the output as the database stores it, tool-call-outcome-row.ts).
 */
export function eventsCte(events: NewLedgerEvent[], params: unknown[], guard: string, sqlMetadata?: (e: NewLedgerEvent) => string | null): string {
  const rows = events.map((e) => {
    const b = params.length;
    params.push(newId(), e.orgId, e.type, e.runId ?? null, e.toolCallId ?? null, e.actor ? JSON.stringify(e.actor) : null, JSON.stringify(e.metadata ?? {}));
    const extra = sqlMetadata?.(e) ?? null;
    const metadata = extra === null ? `$${b + 7}::jsonb` : `$${b + 7}::jsonb || ${extra}`;
    return `($${b + 1}::uuid, $${b + 2}::uuid, $${b + 3}::text, $${b + 4}::uuid, $${b + 5}::uuid, $${b + 6}::jsonb, ${metadata}, ${events.indexOf(e)})`;
  });
  return `INSERT INTO runtime_ledger_events (id, org_id, type, run_id, tool_call_id, actor, metadata)
          SELECT v.id, v.org_id, v.type, v.run_id, v.tool_call_id, v.actor, v.metadata
            FROM (VALUES ${rows.join(', ')}) AS v(id, org_id, type, run_id, tool_call_id, actor, metadata, ord)
           WHERE EXISTS (SELECT 1 FROM ${guard}) ORDER BY v.ord`;
}
