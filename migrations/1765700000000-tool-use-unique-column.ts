import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * tool_calls.tool_use_unique, for ToolUseOncePerRun1765710000000 (which says why). A migration of its own: adding a
 * column takes an ACCESS EXCLUSIVE lock on the table, which blocks its reads too, until the transaction ends. Alone,
 * that is a catalog change (a constant default rewrites nothing); with the next migration's UPDATE and index build in
 * the same transaction, every replay, listing and long-poll waited for a time that grows with the ledger.
 */
export class ToolUseUniqueColumn1765700000000 implements MigrationInterface {
  name = 'ToolUseUniqueColumn1765700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE tool_calls ADD COLUMN tool_use_unique boolean NOT NULL DEFAULT true');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE tool_calls DROP COLUMN tool_use_unique');
  }
}
