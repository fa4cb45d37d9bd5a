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
 * tool_calls is a mutable table: rows from before (writes around the gateway) are repaired
 * first (an infinite time becomes the migration's now()) and the constraint is validated.
 * Left NOT VALID, PostgreSQL would still check it on every UPDATE of such a row, and the
 * orphan sweep, one UPDATE across every org, would fail on every pass because of one row.
 *
 * The ledger is append-only, so its constraints are NOT VALID: rows from before stay as they
 * are, and verify reports them (one it cannot hash, created_at infinite, or one below seq 0).
 * The sealer never updates either kind, so the NOT VALID checks never stop it.
 */
export class LedgerFiniteChecks1765200000000 implements MigrationInterface {
  name = 'LedgerFiniteChecks1765200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      ALTER TABLE runtime_ledger_events
        ADD CONSTRAINT ledger_events_created_at_finite CHECK (isfinite(created_at)) NOT VALID,
        ADD CONSTRAINT ledger_events_seq_not_negative CHECK (seq >= 0) NOT VALID`);
    await q.query(`
      UPDATE tool_calls SET
        created_at = CASE WHEN isfinite(created_at) THEN created_at ELSE now() END,
        updated_at = CASE WHEN isfinite(updated_at) THEN updated_at ELSE now() END,
        started_at = CASE WHEN isfinite(started_at) IS NOT FALSE THEN started_at ELSE now() END,
        finished_at = CASE WHEN isfinite(finished_at) IS NOT FALSE THEN finished_at ELSE now() END
      WHERE NOT (isfinite(created_at) AND isfinite(updated_at) AND isfinite(started_at) IS NOT FALSE AND isfinite(finished_at) IS NOT FALSE)`);
    await q.query(`
      ALTER TABLE tool_calls
        ADD CONSTRAINT tool_calls_times_finite
        CHECK (isfinite(created_at) AND isfinite(updated_at) AND isfinite(started_at) AND isfinite(finished_at))`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('ALTER TABLE tool_calls DROP CONSTRAINT tool_calls_times_finite');
    await q.query('ALTER TABLE runtime_ledger_events DROP CONSTRAINT ledger_events_seq_not_negative, DROP CONSTRAINT ledger_events_created_at_finite');
  }
}
