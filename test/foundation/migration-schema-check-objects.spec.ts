import { describe, expect, it } from 'vitest';
import { DataSource } from 'typeorm';
import { migratorOptions } from '../../src/db/db-options.js';
import { schemaDrift } from '../../src/db/schema-check.js';
import { createScratchDatabase, runStatements } from '../support/scratch-database.js';
import { startTestApp } from '../support/test-app.js';

/** What startTestApp ended with: 'started' (closed again at once), or the error's message. */
async function startOutcome(url: string): Promise<string> {
  try {
    const t = await startTestApp({ DATABASE_URL: url });
    await t.close();
    return 'started';
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

const INCOMPLETE = 'the database schema lacks what this release needs, though typeorm_migrations records every migration as applied';

/**
 * The migrations build objects no entity maps: ledger_seq_ceiling() (the sealer's ceiling), the ledger's append-only
 * guard (ledger_events_guard() and its two triggers), the vendor_tokens and shopify_refund_leases tables. Start-up's
 * schema check looked only at the entities and the unique keys: one of those dropped by hand (a `down` run by hand,
 * its typeorm_migrations row left) went unseen, and the gateway served with a sealer that never sealed, or a ledger
 * that could be edited while verify said ok. It now looks for them too (REQUIRED_OBJECTS), as for a missing column.
 */
describe('start-up refuses a schema missing an object the migrations build outside the entities', () => {
  it('the append-only triggers, ledger_seq_ceiling() and the raw-SQL tables dropped by hand: refused, each named', async () => {
    const db = await createScratchDatabase('tg_mig_objects_all');
    try {
      expect(await startOutcome(db.url)).toBe('started'); // migrates the empty database
      await runStatements(db.url, [
        'DROP TRIGGER ledger_events_no_update ON runtime_ledger_events',
        'DROP TRIGGER ledger_events_no_truncate ON runtime_ledger_events',
        'DROP FUNCTION ledger_seq_ceiling()',
        'DROP TABLE vendor_tokens',
        'DROP TABLE shopify_refund_leases',
      ]);
      const outcome = await startOutcome(db.url);
      expect(outcome).toContain(INCOMPLETE);
      expect(outcome).toMatch(/trigger ledger_events_no_update on runtime_ledger_events \([^)]*\) is missing in the database/);
      expect(outcome).toMatch(/trigger ledger_events_no_truncate on runtime_ledger_events \([^)]*\) is missing in the database/);
      expect(outcome).toMatch(/function ledger_seq_ceiling\(\) \([^)]*\) is missing in the database/);
      expect(outcome).toMatch(/table vendor_tokens \([^)]*\) is missing in the database/);
      expect(outcome).toMatch(/table shopify_refund_leases \([^)]*\) is missing in the database/);
      expect(outcome).not.toContain('ledger_events_guard()'); // still there: only what is missing is named
    } finally {
      await db.drop();
    }
  }, 90_000);

  it('the guard function dropped with its triggers (CASCADE), or a trigger disabled: refused', async () => {
    const db = await createScratchDatabase('tg_mig_objects_guard');
    try {
      expect(await startOutcome(db.url)).toBe('started');
      await runStatements(db.url, ['ALTER TABLE runtime_ledger_events DISABLE TRIGGER ledger_events_no_update']);
      expect(await startOutcome(db.url)).toMatch(/trigger ledger_events_no_update on runtime_ledger_events \([^)]*\) is disabled/);
      await runStatements(db.url, ['DROP FUNCTION ledger_events_guard() CASCADE']);
      const outcome = await startOutcome(db.url);
      expect(outcome).toContain(INCOMPLETE);
      expect(outcome).toMatch(/function ledger_events_guard\(\) \([^)]*\) is missing in the database/);
      expect(outcome).toContain('trigger ledger_events_no_update on runtime_ledger_events');
      expect(outcome).toContain('trigger ledger_events_no_truncate on runtime_ledger_events');
    } finally {
      await db.drop();
    }
  }, 90_000);

  it('LedgerSeqCeiling reverted by hand: refused; its row deleted as the error says, the next start applies it again and starts', async () => {
    const db = await createScratchDatabase('tg_mig_objects_ceiling');
    try {
      expect(await startOutcome(db.url)).toBe('started');
      await runStatements(db.url, ['DROP FUNCTION IF EXISTS ledger_seq_ceiling()']); // LedgerSeqCeiling1765400000000's down
      const outcome = await startOutcome(db.url);
      expect(outcome).toContain(INCOMPLETE);
      expect(outcome).toMatch(/function ledger_seq_ceiling\(\) \([^)]*\) is missing in the database/);
      expect(outcome).toContain('DELETE FROM typeorm_migrations');
      await runStatements(db.url, [`DELETE FROM typeorm_migrations WHERE name = 'LedgerSeqCeiling1765400000000'`]);
      expect(await startOutcome(db.url)).toBe('started');

      // migration:check's scope: the migrated schema has every object, and one no migration is listed for is named.
      const ds = await new DataSource(migratorOptions(db.url)).initialize();
      try {
        expect(await schemaDrift(ds, 'exact')).toEqual([]);
        expect(await schemaDrift(ds, 'needed')).toEqual([]);
        await ds.query(`CREATE FUNCTION later_helper() RETURNS int LANGUAGE sql AS 'SELECT 1'`);
        await ds.query('CREATE TRIGGER later_trigger BEFORE TRUNCATE ON tool_calls FOR EACH STATEMENT EXECUTE FUNCTION ledger_events_guard()');
        await ds.query('CREATE TABLE later_raw (id int PRIMARY KEY)');
        const exact = await schemaDrift(ds, 'exact');
        expect(exact).toContain('function later_helper() exists in the database but is not in REQUIRED_OBJECTS (src/db/schema-check.ts)');
        expect(exact).toContain('trigger later_trigger on tool_calls exists in the database but is not in REQUIRED_OBJECTS (src/db/schema-check.ts)');
        expect(exact).toContain('table later_raw exists in the database but neither an entity nor REQUIRED_OBJECTS (src/db/schema-check.ts) names it');
        expect(await schemaDrift(ds, 'needed')).toEqual([]); // a newer schema's own objects do not stop start-up
      } finally {
        await ds.destroy();
      }
    } finally {
      await db.drop();
    }
  }, 90_000);
});
