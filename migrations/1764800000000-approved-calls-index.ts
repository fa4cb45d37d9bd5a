import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The approvals sweep (every 5 s, on every replica) looks for approved calls
 * nobody has started: `WHERE status = 'approved'` across all orgs. No index
 * served it (the status index leads with org_id), so each pass read the whole
 * tool_calls table. Few calls are ever approved-and-waiting, so this partial
 * index stays tiny, and only the rows entering or leaving `approved` touch it.
 */
export class ApprovedCallsIndex1764800000000 implements MigrationInterface {
  name = 'ApprovedCallsIndex1764800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX tool_calls_approved_idx ON tool_calls (org_id, vendor, updated_at, id) WHERE status = 'approved'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX tool_calls_approved_idx');
  }
}
