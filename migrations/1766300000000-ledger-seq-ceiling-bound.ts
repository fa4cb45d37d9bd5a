import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * ledger_seq_ceiling() names the ledger's identity sequence by the sequence itself, not by its name in a string.
 * Migration 1765400000000 wrote the name resolved when it ran (`'public.runtime_ledger_events_seq_seq'::regclass`) into
 * a string body, which PostgreSQL parses at each call and tracks no dependency of: once the schema was renamed (a backup
 * restored, then its `public` moved to a `tool_gateway` schema of a shared database and the gateway pointed there with
 * search_path), every call of it failed (42P01), so every sealer pass failed and no new event was sealed again, while
 * the gateway served and `ledger:verify` answered ok over the sealed part. A SQL-standard body (BEGIN ATOMIC,
 * PostgreSQL 14 and later) is parsed here once: the sequence is kept by its identity, follows renames of it and its
 * schema, and pg_dump writes it out under the name it has then. On an older server the body stays a string.
 *
 * SECURITY DEFINER, EXECUTE granted to PUBLIC and search_path pinned as before (see 1765400000000); the parsed body
 * looks nothing up by name when called, so search_path holds pg_catalog alone. `down` writes the string body again,
 * with the name the sequence has then.
 */
export class LedgerSeqCeilingBound1766300000000 implements MigrationInterface {
  name = 'LedgerSeqCeilingBound1766300000000';

  async up(q: QueryRunner): Promise<void> {
    const [{ atomic }] = (await q.query(`SELECT current_setting('server_version_num')::int >= 140000 AS atomic`)) as [{ atomic: boolean }];
    if (!atomic) return;
    const seq = await sequenceLiteral(q);
    await q.query(`
      CREATE OR REPLACE FUNCTION ledger_seq_ceiling() RETURNS bigint LANGUAGE sql SECURITY DEFINER
        SET search_path = pg_catalog
        BEGIN ATOMIC SELECT pg_sequence_last_value(${seq}::regclass); END`);
  }

  async down(q: QueryRunner): Promise<void> {
    const seq = await sequenceLiteral(q);
    await q.query(`
      CREATE OR REPLACE FUNCTION ledger_seq_ceiling() RETURNS bigint LANGUAGE sql SECURITY DEFINER
        SET search_path = pg_catalog, public
        AS $$ SELECT pg_sequence_last_value(${seq}::regclass) $$`);
  }
}

/** The identity sequence's schema-qualified name as a quoted literal, resolved as the migrations resolve the table. */
async function sequenceLiteral(q: QueryRunner): Promise<string> {
  const [{ seq }] = (await q.query(`SELECT quote_literal(pg_get_serial_sequence('runtime_ledger_events', 'seq')) AS seq`)) as [{ seq: string }];
  return seq;
}
