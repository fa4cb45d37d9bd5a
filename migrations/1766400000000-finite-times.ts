import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Migration 1765200000000 refused ±infinity in tool_calls' and the ledger's times; every other table kept taking one.
 * The gateway never writes an infinite time, but a row written around it (a hand-made fix, a restore from another tool)
 * could, and pg reads ±infinity as the number ±Infinity, whose toISOString() throws: one api_keys row with
 * created_at = 'infinity' made every platform-wide GET /v1/api-keys a 500 (infinity sorts first: page 1), one approval
 * did the same to GET /v1/approvals, and the keyset cursor of such a row (CREATED_ISO_SQL) is NULL.
 *
 * The mutable tables, as tool_calls was: rows from before are repaired (an infinite time becomes the migration's now():
 * an approval then expires, a token is refreshed, a refresh lease is free, a revoked key stays revoked) and the
 * constraint is validated. policy_decisions is a record like the ledger (never updated): NOT VALID, its rows kept,
 * and its reader (a tool call's story) shows PostgreSQL's spelling (timeText). shopify_refund_leases.lease_until is
 * left free: only SQL compares it, and `infinity` there holds an order's refunds until ops release it, as written.
 */
const REPAIRED: [table: string, columns: string[]][] = [
  ['orgs', ['created_at']],
  ['api_keys', ['created_at', 'revoked_at', 'last_used_at']],
  ['agent_runs', ['created_at', 'updated_at']],
  ['approval_requests', ['created_at', 'decided_at', 'expires_at']],
  ['feature_flags', ['updated_at']],
  ['policies', ['updated_at']],
  ['tool_permissions', ['updated_at']],
  ['integration_credentials', ['created_at', 'updated_at']],
  ['vendor_tokens', ['access_expires_at', 'lease_until', 'updated_at']],
  ['tool_call_inputs', ['created_at']],
  ['tool_call_results', ['created_at', 'expires_at']],
];

/** NULL passes a CHECK (isfinite(NULL) is NULL), so nullable columns stay nullable. */
const finite = (columns: string[]): string => columns.map((c) => `isfinite(${c}) IS NOT FALSE`).join(' AND ');
const constraintName = (table: string): string => `${table}_times_finite`;

export class FiniteTimes1766400000000 implements MigrationInterface {
  name = 'FiniteTimes1766400000000';

  async up(q: QueryRunner): Promise<void> {
    // Validating reads each table whole: on a large one that outlasts the pool's statement timeout.
    await q.query('SET LOCAL statement_timeout = 0');
    for (const [table, columns] of REPAIRED) {
      const set = columns.map((c) => `${c} = CASE WHEN isfinite(${c}) IS NOT FALSE THEN ${c} ELSE now() END`).join(', ');
      await q.query(`UPDATE ${table} SET ${set} WHERE NOT (${finite(columns)})`);
      await q.query(`ALTER TABLE ${table} ADD CONSTRAINT ${constraintName(table)} CHECK (${finite(columns)})`);
    }
    await q.query(`ALTER TABLE policy_decisions ADD CONSTRAINT ${constraintName('policy_decisions')} CHECK (isfinite(created_at)) NOT VALID`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE policy_decisions DROP CONSTRAINT ${constraintName('policy_decisions')}`);
    for (const [table] of [...REPAIRED].reverse()) await q.query(`ALTER TABLE ${table} DROP CONSTRAINT ${constraintName(table)}`);
  }
}
