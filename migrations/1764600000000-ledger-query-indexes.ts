import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Indexes for the ops ledger queries (API.md §6): every filter of
 * GET /v1/tool-calls and /v1/ledger/events, in the keyset order
 * (created_at DESC, id|seq DESC), so a page is a short index range scan that
 * stops after `limit` rows, whatever its depth.
 *
 * Chosen from EXPLAIN (ANALYZE) on the `npm run bench:ledger` data: 1,000,000
 * tool calls and 2,000,000 events, 100 orgs (one holds 30% of the calls), tools
 * skewed 40%..0.5%, outcomes 80% succeeded..1% indeterminate. Each index below
 * was dropped in turn (inside a rolled-back transaction) and the queries
 * re-planned; it stays only because some query's plan uses it and gets slower
 * without it (median execution time, with → without, page of 51 rows):
 *
 * | index | used by | with → without |
 * |---|---|---|
 * | tool_calls_org_status_idx | status=, alone or with others | rare status in a small org 0.08 → 7.3 ms (bitmap + sort) |
 * | tool_calls_org_tool_idx | toolName= | 1%-tool in a small org 0.08 → 7.7 ms; in the 30% org 0.08 → 3.0 ms |
 * | tool_calls_org_action_idx | action=, toolName+action | action alone 0.08 → 13 ms; all orgs tool+action 21 → 154 ms |
 * | tool_calls_org_error_idx (partial: error_code IS NOT NULL, ~17% of rows, 13 MB) | errorCode= | 0.08 → 3.3 ms |
 * | tool_calls_corr_idx | correlationId=, any org (few rows each, sorted after) | 0.03 → 203 ms (parallel seq scan) |
 * | tool_calls_created_idx | platform keys listing every org; the 30% org's first pages | all orgs, first page 0.07 → 1,034 ms; time range 0.07 → 763 ms |
 * | ledger_events_run_idx (partial: run_id IS NOT NULL) | events runId= | 0.06 → 56 ms |
 * | ledger_events_org_type_idx | events type= | 0.07 → 9 ms |
 * | ledger_events_created_idx | events of every org (platform keys) | 0.06 → 1,712 ms |
 *
 * Already there from the initial schema and used as they are:
 * tool_calls_org_created_idx (an org's pages and time ranges; deep pages),
 * tool_calls_run_idx (runId=), tool_calls_pkey (the detail view),
 * ledger_events_org_created_idx (an org's events) and ledger_events_call_idx
 * (a call's events in the detail view).
 *
 * Combined filters use the most selective of these and filter the rest
 * (status+toolName+since → org_status_idx). Tried and not added:
 * (org_id, tool_name, action, created_at, id) takes toolName+action from
 * 3.2 to 0.13 ms in the 30% org, but org_action_idx already serves it (action
 * names are nearly unique per tool) and a tenth index costs every write.
 * Also not added: filter indexes without org_id for platform-wide filtered
 * lists; those walk tool_calls_created_idx newest first and filter, costing
 * in proportion to the rarity of the value (1–21 ms at 1M rows).
 * Cost: tool_calls writes maintain 6 more indexes (status changes are never
 * HOT updates anyway: status is indexed); about +40 µs per row written on the
 * 2-core bench machine.
 *
 * On a large live table, build them first by hand with CREATE INDEX
 * CONCURRENTLY under the same names; IF NOT EXISTS then makes this a no-op.
 * A concurrent build that was interrupted (its session killed, the connection
 * lost, Ctrl-C) leaves an INVALID index of its name: maintained on every write,
 * never used by a plan. IF NOT EXISTS took it for built; such an index is
 * dropped here and built, unless it is being built right now or its table's
 * lock does not come within 100 ms (then the start-up warning names it).
 */
const INDEXES: [name: string, definition: string][] = [
  ['tool_calls_org_status_idx', 'tool_calls (org_id, status, created_at DESC, id DESC)'],
  ['tool_calls_org_tool_idx', 'tool_calls (org_id, tool_name, created_at DESC, id DESC)'],
  ['tool_calls_org_action_idx', 'tool_calls (org_id, action, created_at DESC, id DESC)'],
  ['tool_calls_org_error_idx', 'tool_calls (org_id, error_code, created_at DESC, id DESC) WHERE error_code IS NOT NULL'],
  ['tool_calls_corr_idx', 'tool_calls (correlation_id)'],
  ['tool_calls_created_idx', 'tool_calls (created_at DESC, id DESC)'],
  ['ledger_events_run_idx', 'runtime_ledger_events (run_id, created_at DESC, seq DESC) WHERE run_id IS NOT NULL'],
  ['ledger_events_org_type_idx', 'runtime_ledger_events (org_id, type, created_at DESC, seq DESC)'],
  ['ledger_events_created_idx', 'runtime_ledger_events (created_at DESC, seq DESC)'],
];

export class LedgerQueryIndexes1764600000000 implements MigrationInterface {
  name = 'LedgerQueryIndexes1764600000000';

  async up(q: QueryRunner): Promise<void> {
    // Building on a large table outlasts the pool's 15 s statement timeout; this migration runs in its own transaction.
    await q.query('SET LOCAL statement_timeout = 0');
    // Not one being built right now (an operator's CREATE INDEX CONCURRENTLY in progress is invalid until done), and
    // only if its table's lock comes at once: a DROP waiting for it would hold back every reader of the table queued
    // behind it. One left is said at every start (the invalid-index warning), to be rebuilt by hand.
    const invalid = (await q.query(
      `SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE NOT i.indisvalid AND c.relname = ANY($1) AND c.relnamespace = to_regnamespace(quote_ident(current_schema()))
          AND NOT EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.index_relid = c.oid)`,
      [INDEXES.map(([name]) => name)],
    )) as { name: string }[];
    if (invalid.length > 0) {
      const [{ waits }] = (await q.query(`SELECT current_setting('lock_timeout') AS waits`)) as [{ waits: string }];
      await q.query(`SET LOCAL lock_timeout = '100ms'`);
      for (const { name } of invalid) {
        await q.query('SAVEPOINT drop_invalid_index');
        try {
          await q.query(`DROP INDEX ${name}`);
          await q.query('RELEASE SAVEPOINT drop_invalid_index');
        } catch {
          await q.query('ROLLBACK TO SAVEPOINT drop_invalid_index');
        }
      }
      await q.query(`SELECT set_config('lock_timeout', $1, true)`, [waits]);
    }
    for (const [name, def] of INDEXES) await q.query(`CREATE INDEX IF NOT EXISTS ${name} ON ${def}`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const [name] of [...INDEXES].reverse()) await q.query(`DROP INDEX IF EXISTS ${name}`);
  }
}
