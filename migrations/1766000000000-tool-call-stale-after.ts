import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * tool_calls.stale_after_ms: how long the replica that started a call may hold it running (its VENDOR_TIMEOUT_MS +
 * STALE_RUNNING_MARGIN_MS), written when the call goes running. The orphan sweep judged every replica's calls by its
 * own configuration: during a roll that changed VENDOR_TIMEOUT_MS by more than the margin, a replica with the shorter
 * one marked indeterminate a call another still had at its vendor, and the outcome it then had was lost. Null for
 * calls started before, and by a previous release during a rolling upgrade, which writes without it (a nullable
 * column with no default: no rewrite, and no change for that release): the sweeping replica's own configuration
 * judges those, as before.
 */
export class ToolCallStaleAfter1766000000000 implements MigrationInterface {
  name = 'ToolCallStaleAfter1766000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS stale_after_ms integer');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE tool_calls DROP COLUMN IF EXISTS stale_after_ms');
  }
}
