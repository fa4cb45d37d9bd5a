import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Three lookups that read a whole table for a handful of rows once the ledger is large (EXPLAIN ANALYZE on 2,000,000
 * tool calls, 4,000,000 events and 39,000 approvals, the `npm run bench:ledger` data made production-like: approvals
 * decided or expired, most runs ended, unknown outcomes reconciled, rare event types spread over 30 days):
 *
 * | index | used by | before → after |
 * |---|---|---|
 * | tool_calls_unsettled_idx (partial: not succeeded, failed or blocked) | a platform key's `GET /v1/tool-calls?status=` for an open status — the reconcile work list, `status=indeterminate`, and its export | 440–691 ms (parallel seq scan of every call) → 0.1–0.3 ms |
 * | ledger_events_uncommon_type_idx (partial: not one of the five per-call types) | a platform key's `GET /v1/ledger/events?type=` for a rare type (`run.cancelled`, `api_key.revoked`, `tool_call.indeterminate`) | 365–714 ms → 0.3 ms |
 * | approval_requests_pending_run_idx (partial: pending) | the minute-by-minute pass finishing ended runs (RunsService, ENDED_RUNS_WITH_PENDING_APPROVALS_SQL) on every replica | 35–48 ms, growing with every approval ever made → 7–8 ms |
 *
 * Migration 1764600000000 left out filter indexes without org_id: a common value is found quickly walking the
 * newest-first index, but a rare one is a scan of everything. Only rows with a rare value enter these (the partial
 * predicates): a recorded call enters tool_calls_unsettled_idx once, while it runs or waits (its settled version does
 * not), the per-call events never enter theirs, and an approval enters its own while pending — a few MB at that scale.
 * A status or type named in a predicate's list is served as before. Built in the migration's transaction (writes to
 * the three tables wait for the builds: seconds at that scale); on a large live table, build them first by hand with
 * CREATE INDEX CONCURRENTLY under the same names, which IF NOT EXISTS then keeps.
 */
const INDEXES: [name: string, definition: string][] = [
  ['tool_calls_unsettled_idx', `tool_calls (status, created_at DESC, id DESC) WHERE status NOT IN ('succeeded', 'failed', 'blocked')`],
  [
    'ledger_events_uncommon_type_idx',
    `runtime_ledger_events (type, created_at DESC, seq DESC)
      WHERE type NOT IN ('tool_call.requested', 'tool_call.started', 'tool_call.succeeded', 'tool_call.failed', 'tool_call.blocked')`,
  ],
  ['approval_requests_pending_run_idx', `approval_requests (run_id) WHERE status = 'pending'`],
];

export class RareFilterIndexes1766100000000 implements MigrationInterface {
  name = 'RareFilterIndexes1766100000000';

  async up(q: QueryRunner): Promise<void> {
    // Building on a large table outlasts the pool's statement timeout; this migration runs in its own transaction.
    await q.query('SET LOCAL statement_timeout = 0');
    for (const [name, definition] of INDEXES) await q.query(`CREATE INDEX IF NOT EXISTS ${name} ON ${definition}`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const [name] of [...INDEXES].reverse()) await q.query(`DROP INDEX IF EXISTS ${name}`);
  }
}
