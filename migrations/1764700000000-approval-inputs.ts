import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * An approved call must run with exactly the params that were approved, but
 * the ledger keeps only redacted input. The raw params of a call waiting for
 * approval are kept here, encrypted (AES-256-GCM, AAD = org + call), and
 * deleted once the call has run or been refused.
 *
 * Also drops agent_runs.total_cost_cents: a run's cost is the sum of its
 * calls' cost_cents, computed on read, so no hot run row is updated per call.
 */
export class ApprovalInputs1764700000000 implements MigrationInterface {
  name = 'ApprovalInputs1764700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE tool_call_inputs (
        tool_call_id uuid PRIMARY KEY,
        org_id uuid NOT NULL,
        key_id text NOT NULL,
        iv bytea NOT NULL,
        ciphertext bytea NOT NULL,
        auth_tag bytea NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      ALTER TABLE agent_runs DROP COLUMN total_cost_cents;
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    // The column comes back with what it used to hold, not zeros: each run's calls' cost.
    await q.query(`
      ALTER TABLE agent_runs ADD COLUMN total_cost_cents bigint NOT NULL DEFAULT 0;
      UPDATE agent_runs r SET total_cost_cents = c.total
        FROM (SELECT run_id, sum(cost_cents) AS total FROM tool_calls GROUP BY run_id) c
       WHERE r.id = c.run_id;
      DROP TABLE tool_call_inputs;
    `);
  }
}
