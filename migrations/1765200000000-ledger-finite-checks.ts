import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Values the gateway never writes and its readers cannot carry, refused from now on:
 *
 * - a timestamp of ±infinity in runtime_ledger_events.created_at or tool_calls' created_at,
 *   updated_at, started_at, finished_at. pg reads it as an Invalid Date, whose toISOString()
 *   throws: one such event made every first page of GET /v1/ledger/events (org and
 *   platform-wide) and GET /v1/tool-calls/:id a 500. (NULL passes a CHECK, so the nullable
 *   columns stay nullable.)
 * - a runtime_ledger_events.seq below 0 (an insert with OVERRIDING SYSTEM VALUE): the sealer
 *   reads from seq 0 up, so such an event was never sealed, and the listing's cursor cannot
 *   name it. The identity starts at 1; 0 is allowed because the sealer seals it like any
 *   other row (with `seq > 0` an unsealed seq-0 row from before would fail the sealer's
 *   batch UPDATE, which re-checks the constraint, on every pass, for every org).
 *
 * NOT VALID: rows from before (writes around the gateway) do not block the deploy, and are
 * left as they are (the ledger is append-only). Verify reports such events: one it cannot
 * hash (created_at infinite) or that lies below seq 0. PostgreSQL still checks a NOT VALID
 * constraint on every UPDATE of a row, so a tool call from before with an infinite timestamp
 * fails any statement that updates it (the orphan sweep included) until it is corrected. To
 * find them, and then validate the constraints:
 *   SELECT id FROM tool_calls WHERE NOT (isfinite(created_at) AND isfinite(updated_at)
 *     AND coalesce(isfinite(started_at), true) AND coalesce(isfinite(finished_at), true));
 *   ALTER TABLE tool_calls VALIDATE CONSTRAINT tool_calls_times_finite;
 */
export class LedgerFiniteChecks1765200000000 implements MigrationInterface {
  name = 'LedgerFiniteChecks1765200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE runtime_ledger_events
        ADD CONSTRAINT ledger_events_created_at_finite CHECK (isfinite(created_at)) NOT VALID,
        ADD CONSTRAINT ledger_events_seq_not_negative CHECK (seq >= 0) NOT VALID`);
    await q.query(`
      ALTER TABLE tool_calls
        ADD CONSTRAINT tool_calls_times_finite
        CHECK (isfinite(created_at) AND isfinite(updated_at) AND isfinite(started_at) AND isfinite(finished_at)) NOT VALID`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_times_finite');
    await q.query('ALTER TABLE runtime_ledger_events DROP CONSTRAINT ledger_events_seq_not_negative, DROP CONSTRAINT ledger_events_created_at_finite');
  }
}
