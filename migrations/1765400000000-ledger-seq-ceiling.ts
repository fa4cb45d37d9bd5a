import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * ledger_seq_ceiling(): the last seq the ledger's identity sequence handed out,
 * for the sealer (LedgerSealerService, its "ceiling"). pg_sequence_last_value
 * needs SELECT or USAGE on the sequence, and inserting into a GENERATED ALWAYS
 * AS IDENTITY column needs neither: a gateway connecting as an application role
 * with table privileges only appended events but failed every sealer pass
 * ("permission denied for sequence"), and verify went on saying ok over a sealed
 * prefix that no longer grew. The function runs as its owner, the migrating role
 * that owns the sequence; the value it gives away is a count any role that can
 * read the table has anyway, so EXECUTE stays granted to PUBLIC (the default).
 *
 * The sequence is named schema-qualified, resolved here the way the migrations
 * resolve runtime_ledger_events; search_path is pinned, as for any SECURITY
 * DEFINER function, so no caller's objects are looked up in the owner's name.
 */
export class LedgerSeqCeiling1765400000000 implements MigrationInterface {
  name = 'LedgerSeqCeiling1765400000000';

  async up(q: QueryRunner): Promise<void> {
    const [{ seq }] = (await q.query(`SELECT quote_literal(pg_get_serial_sequence('runtime_ledger_events', 'seq')) AS seq`)) as [{ seq: string }];
    await q.query(`
      CREATE FUNCTION ledger_seq_ceiling() RETURNS bigint LANGUAGE sql SECURITY DEFINER
        SET search_path = pg_catalog, public
        AS $$ SELECT pg_sequence_last_value(${seq}::regclass) $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP FUNCTION IF EXISTS ledger_seq_ceiling()');
  }
}
