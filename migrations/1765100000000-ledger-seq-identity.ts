import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * runtime_ledger_events.seq refuses explicit values: GENERATED ALWAYS AS IDENTITY
 * instead of bigserial. The sealer reads unsealed events from the highest seq it
 * has sealed (SealFrontier), so one row inserted around the gateway with a huge
 * seq (2^50) left every later event of every org unsealed until the next full
 * scan, a minute at a time, for as long as the process ran. The gateway never
 * names seq in an insert; now an insert that does fails, unless it says
 * OVERRIDING SYSTEM VALUE, which the sealer answers by never moving its frontier
 * past the sequence (LedgerSealerService).
 *
 * The identity continues where the old sequence was, or just past the highest
 * seq if an explicit insert already went beyond it (a later insert would collide
 * with it and fail). Seqs from 2^53 up are left out of that: no real ledger gets
 * there, and the sealer counts seqs in JS numbers, exact only below it.
 *
 * No row is rewritten (the append-only trigger never fires); the table is locked
 * for the switch, so no insert takes a value from the old sequence after its
 * position is read.
 */
export class LedgerSeqIdentity1765100000000 implements MigrationInterface {
  name = 'LedgerSeqIdentity1765100000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('LOCK TABLE runtime_ledger_events IN ACCESS EXCLUSIVE MODE');
    const next = await nextSeq(q);
    await q.query('ALTER TABLE runtime_ledger_events ALTER COLUMN seq DROP DEFAULT');
    await q.query('DROP SEQUENCE runtime_ledger_events_seq_seq');
    // Named runtime_ledger_events_seq_seq again (PostgreSQL's default for the identity's sequence).
    await q.query(`ALTER TABLE runtime_ledger_events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (START WITH ${next})`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('LOCK TABLE runtime_ledger_events IN ACCESS EXCLUSIVE MODE');
    const next = await nextSeq(q);
    await q.query('ALTER TABLE runtime_ledger_events ALTER COLUMN seq DROP IDENTITY');
    await q.query('CREATE SEQUENCE runtime_ledger_events_seq_seq AS bigint OWNED BY runtime_ledger_events.seq');
    await q.query(`SELECT setval('runtime_ledger_events_seq_seq', ${next}, false)`);
    await q.query(`ALTER TABLE runtime_ledger_events ALTER COLUMN seq SET DEFAULT nextval('runtime_ledger_events_seq_seq')`);
  }
}

/** The seq the next insert gets: the sequence's next value, or past the highest seq below 2^53 if that is higher. (Serial or identity, the sequence has this name.) */
async function nextSeq(q: QueryRunner): Promise<bigint> {
  const [{ next }] = (await q.query(
    `SELECT GREATEST((SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM runtime_ledger_events_seq_seq),
                     (SELECT coalesce(max(seq), 0) + 1 FROM runtime_ledger_events WHERE seq < 9007199254740992))::text AS next`,
  )) as [{ next: string }];
  return BigInt(next); // a literal in START WITH / setval: parsed, never pasted as text
}
