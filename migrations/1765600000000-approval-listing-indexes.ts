import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The approvals listing (GET /v1/approvals) pages newest first, by (created_at, id). Its only index led with
 * (org_id, status), so the order came from an index only when one status was named: without it, with a kind or a
 * runId, and for a platform key listing every org, each page read and sorted every matching approval (an org with
 * 85,000 decided approvals: 313 ms for a 1-row page; a runId, which had no index at all, scanned the whole table).
 * These give every filter combination its keyset order from an index, as the tool-call listings have it; the run's
 * also serves a run's end and its expiry-on-read, which look up its pending approvals by run_id.
 * Approvals are few next to tool calls: three entries per approval written cost nothing measurable.
 * Built inside the migration's transaction (as every earlier index): writes to approval_requests wait for the build.
 */
export class ApprovalListingIndexes1765600000000 implements MigrationInterface {
  name = 'ApprovalListingIndexes1765600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('CREATE INDEX approval_requests_org_created_idx ON approval_requests (org_id, created_at DESC, id DESC)');
    await q.query('CREATE INDEX approval_requests_created_idx ON approval_requests (created_at DESC, id DESC)');
    await q.query('CREATE INDEX approval_requests_run_idx ON approval_requests (run_id, created_at DESC, id DESC)');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX approval_requests_run_idx');
    await q.query('DROP INDEX approval_requests_created_idx');
    await q.query('DROP INDEX approval_requests_org_created_idx');
  }
}
