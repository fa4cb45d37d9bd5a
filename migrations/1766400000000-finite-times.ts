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
 *
 * Outside a transaction (`transaction = false`), one table at a time, while replicas of the previous release serve:
 * - the CHECK is added NOT VALID in a transaction of its own, the table's only lock held: brief (no scan), and never
 *   held while another table's lock is waited for. In one transaction over the twelve tables, the migration held the
 *   ones done while it waited for the next, whose rows an old replica's transaction held while it waited for one of
 *   those: a deadlock, the new release refusing to start or old replicas answering 503/500 (found with a release of
 *   the previous week serving ten clients); and every read of the tables done waited for the scans of the rest (2.7 s
 *   at 2,000,000 runs and results);
 * - the rows from before are repaired (one UPDATE, of the rows with an infinite time only);
 * - VALIDATE CONSTRAINT reads the table under a lock that lets reads and writes go on.
 * Each step is idempotent (the constraint is added only where missing; VALIDATE of a valid one does nothing), so a run
 * stopped between two (a lock timeout, the process killed) is taken up again by the next. The lock waits are the
 * session's lock_timeout (LockBoundedMigrationExecutor).
 *
 * The down is empty: the constraints stay. Earlier releases never write an infinite time, and dropping twelve
 * constraints in the one transaction a revert runs in is the deadlock above, against the release gone back to.
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
const finiteTimesConstraint = (table: string): string => `${table}_times_finite`;

export class FiniteTimes1766400000000 implements MigrationInterface {
  name = 'FiniteTimes1766400000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    for (const [table, columns] of REPAIRED) {
      await addNotValid(q, table, finite(columns));
      const set = columns.map((c) => `${c} = CASE WHEN isfinite(${c}) IS NOT FALSE THEN ${c} ELSE now() END`).join(', ');
      await q.query(`UPDATE ${table} SET ${set} WHERE NOT (${finite(columns)})`);
      await q.query(`ALTER TABLE ${table} VALIDATE CONSTRAINT ${finiteTimesConstraint(table)}`);
    }
    await addNotValid(q, 'policy_decisions', finite(['created_at']));
  }

  async down(): Promise<void> {}
}

/** `CHECK (check) NOT VALID` on `table`, unless it has it already, in a transaction of its own. */
async function addNotValid(q: QueryRunner, table: string, check: string): Promise<void> {
  await q.startTransaction();
  try {
    const [{ present }] = (await q.query(
      `SELECT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass(quote_ident(current_schema()) || '.' || $1) AND conname = $2) AS present`,
      [table, finiteTimesConstraint(table)],
    )) as { present: boolean }[];
    if (!present) await q.query(`ALTER TABLE ${table} ADD CONSTRAINT ${finiteTimesConstraint(table)} CHECK (${check}) NOT VALID`);
    await q.commitTransaction();
  } catch (err) {
    await q.rollbackTransaction().catch(() => undefined);
    throw err;
  }
}
