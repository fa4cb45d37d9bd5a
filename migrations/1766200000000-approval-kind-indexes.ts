import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The approvals listing (GET /v1/approvals) filtered by kind: an agent key's is always `kind=client` (it sees client
 * approvals only), an expert's or admin's may name a kind. No index led with the kind, so where the other kind is the
 * common one each page read every approval of the org, or of every org for a platform key, and sorted the few that
 * matched: an agent of an org with 90,000 decided expert approvals and no client ones, polling its list, had each
 * empty page read all 94,000 rows (16–24 ms, a sequential scan of the table, growing with every approval ever made).
 * These give a named kind its keyset order from an index, per org and across orgs, as migration 1765600000000 did for
 * the other filters. Approvals are few next to tool calls: two more entries per approval written cost nothing
 * measurable. Built in the migration's transaction (writes to approval_requests wait for the builds: seconds at a
 * million approvals); on a large live table, build them first by hand with CREATE INDEX CONCURRENTLY under the same
 * names, which IF NOT EXISTS then keeps.
 */
const INDEXES: [name: string, definition: string][] = [
  ['approval_requests_org_kind_idx', 'approval_requests (org_id, kind, created_at DESC, id DESC)'],
  ['approval_requests_kind_idx', 'approval_requests (kind, created_at DESC, id DESC)'],
];

export class ApprovalKindIndexes1766200000000 implements MigrationInterface {
  name = 'ApprovalKindIndexes1766200000000';

  async up(q: QueryRunner): Promise<void> {
    // Building on a large table outlasts the pool's statement timeout; this migration runs in its own transaction.
    await q.query('SET LOCAL statement_timeout = 0');
    for (const [name, definition] of INDEXES) await q.query(`CREATE INDEX IF NOT EXISTS ${name} ON ${definition}`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const [name] of [...INDEXES].reverse()) await q.query(`DROP INDEX IF EXISTS ${name}`);
  }
}
