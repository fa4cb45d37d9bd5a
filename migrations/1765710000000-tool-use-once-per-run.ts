import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A tool_use id names one call in its run, whatever Idempotency-Key it comes with. The key alone was unique (per
 * org): the same tool_use sent again under another key (a runtime that restarted and lost the keys it had chosen,
 * or one that read "the same id or Idempotency-Key" in a 503 and sent the id alone) was a new call, and a write ran
 * twice at the vendor. Model tool_use ids are unique by construction: in one run, the same id is the same call.
 *
 * Calls recorded before this migration may already hold a tool_use id twice in a run (under two keys): they stay as
 * they were (ledger rows are not rewritten), marked `tool_use_unique = false` (ToolUseUniqueColumn1765700000000) on
 * every call but the first, and the unique index covers the rest. SHARE ROW EXCLUSIVE, taken first, keeps writes out
 * from the marking to the end of the build (a call recorded in between could hold a duplicate the build would then
 * refuse) and lets reads on: replays, listings and long-polls go on; calls being recorded wait for the build.
 */
export class ToolUseOncePerRun1765710000000 implements MigrationInterface {
  name = 'ToolUseOncePerRun1765710000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('LOCK TABLE tool_calls IN SHARE ROW EXCLUSIVE MODE');
    await q.query(
      `UPDATE tool_calls t SET tool_use_unique = false
        WHERE EXISTS (SELECT 1 FROM tool_calls e WHERE e.run_id = t.run_id AND e.tool_use_id = t.tool_use_id AND (e.created_at, e.id) < (t.created_at, t.id))`,
    );
    await q.query('CREATE UNIQUE INDEX tool_calls_run_tool_use_uq ON tool_calls (run_id, tool_use_id) WHERE tool_use_unique');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX tool_calls_run_tool_use_uq');
    await q.query('UPDATE tool_calls SET tool_use_unique = true WHERE NOT tool_use_unique');
  }
}
