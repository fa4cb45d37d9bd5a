import { describe, expect, it } from 'vitest';
import { DataSource } from 'typeorm';
import { revertMigration } from '../../src/db/migration-runner.js';
import { migratorOptions } from '../../src/db/db-options.js';
import { createScratchDatabase, runStatements } from '../support/scratch-database.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, startTestApp } from '../support/test-app.js';

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

/** The SQL of ToolUseOncePerRun1765710000000's down, then of ToolUseUniqueColumn1765700000000's: a revert by hand. */
const ONCE_PER_RUN_DOWN = ['DROP INDEX tool_calls_run_tool_use_uq', 'UPDATE tool_calls SET tool_use_unique = true WHERE NOT tool_use_unique'];
const UNIQUE_COLUMN_DOWN = ['ALTER TABLE tool_calls DROP COLUMN tool_use_unique'];

/**
 * typeorm_migrations says which migrations ran, not what the schema is now. Reverted with the SQL of their `down` (as
 * README said; their rows left), the two ToolUse migrations were never applied again: the release deployed again
 * started without its column and index, answered 500 to a resend, and ran a tool_use again at its vendor under another
 * key. Start-up now reads the schema itself, and `revertMigration` (`migrate revert`) takes the row with the `down`.
 */
describe('start-up refuses a schema missing what the code needs, and accepts a newer one', () => {
  it('both ToolUse migrations reverted by hand, their rows left: the release refuses to start, naming the column and the index', async () => {
    const db = await createScratchDatabase('tg_mig_check_both');
    try {
      expect(await startOutcome(db.url)).toBe('started'); // migrates the empty database
      await runStatements(db.url, [...ONCE_PER_RUN_DOWN, ...UNIQUE_COLUMN_DOWN]);
      const outcome = await startOutcome(db.url);
      expect(outcome).toContain('the database schema lacks what this release needs, though typeorm_migrations records every migration as applied');
      expect(outcome).toContain('tool_calls.tool_use_unique is mapped but missing in the database');
      expect(outcome).toContain('unique index tool_calls_run_tool_use_uq on tool_calls (run_id, tool_use_id) WHERE tool_use_unique is missing in the database');
      expect(outcome).toContain('DELETE FROM typeorm_migrations');
    } finally {
      await db.drop();
    }
  }, 60_000);

  it('only the index reverted by hand (a tool_use resent under another key would run twice): the release refuses to start', async () => {
    const db = await createScratchDatabase('tg_mig_check_index');
    try {
      expect(await startOutcome(db.url)).toBe('started');
      await runStatements(db.url, ONCE_PER_RUN_DOWN);
      const outcome = await startOutcome(db.url);
      expect(outcome).toContain('unique index tool_calls_run_tool_use_uq on tool_calls (run_id, tool_use_id) WHERE tool_use_unique is missing in the database');
      expect(outcome).not.toContain('tool_calls.tool_use_unique is mapped');
      // Their rows deleted as the error says: the next start applies them again, and starts.
      await runStatements(db.url, [`DELETE FROM typeorm_migrations WHERE name = 'ToolUseOncePerRun1765710000000'`]);
      expect(await startOutcome(db.url)).toBe('started');
    } finally {
      await db.drop();
    }
  }, 60_000);

  it('a database newer than the code (a later release migrated it: another column, table, unique index, migration, unique indexes renamed) is accepted', async () => {
    const db = await createScratchDatabase('tg_mig_check_newer');
    try {
      expect(await startOutcome(db.url)).toBe('started');
      await runStatements(db.url, [
        'ALTER TABLE tool_calls ADD COLUMN later_release text',
        'ALTER TABLE tool_calls ALTER COLUMN correlation_id DROP NOT NULL',
        'CREATE TABLE later_release_things (id uuid PRIMARY KEY, name text NOT NULL UNIQUE)',
        'CREATE UNIQUE INDEX tool_calls_later_uq ON tool_calls (org_id, tool_use_id, later_release)',
        // Renamed, the same keys (the table, the columns, partial or not): what this code's ON CONFLICT relies on is there.
        'ALTER INDEX approval_requests_tool_call_id_key RENAME TO approval_requests_tool_call_uq',
        'ALTER INDEX tool_calls_run_tool_use_uq RENAME TO tool_calls_tool_use_once_uq',
        `INSERT INTO typeorm_migrations (timestamp, name) VALUES (1799999999999, 'LaterRelease1799999999999')`,
      ]);
      expect(await startOutcome(db.url)).toBe('started');
    } finally {
      await db.drop();
    }
  }, 60_000);

  it('reverted with revertMigration (migrate revert), then started again: the migrations are applied again, a resend is a replay, the tool_use runs once', async () => {
    const db = await createScratchDatabase('tg_mig_check_revert');
    let h: Harness | undefined;
    try {
      expect(await startOutcome(db.url)).toBe('started');
      const ds = await new DataSource(migratorOptions(db.url)).initialize();
      try {
        // The last applied first, by name: another name is refused, and nothing is reverted.
        expect(await revertMigration(ds, 'ToolUseUniqueColumn1765700000000')).toEqual({ last: 'FiniteTimes1766400000000', reverted: false });
        expect(await revertMigration(ds, 'FiniteTimes1766400000000')).toEqual({ last: 'FiniteTimes1766400000000', reverted: true });
        expect(await revertMigration(ds, 'LedgerSeqCeilingBound1766300000000')).toEqual({ last: 'LedgerSeqCeilingBound1766300000000', reverted: true });
        expect(await revertMigration(ds, 'ApprovalKindIndexes1766200000000')).toEqual({ last: 'ApprovalKindIndexes1766200000000', reverted: true });
        expect(await revertMigration(ds, 'RareFilterIndexes1766100000000')).toEqual({ last: 'RareFilterIndexes1766100000000', reverted: true });
        expect(await revertMigration(ds, 'ToolCallStaleAfter1766000000000')).toEqual({ last: 'ToolCallStaleAfter1766000000000', reverted: true });
        expect(await revertMigration(ds, 'ApprovalInputShownExactly1765900000000')).toEqual({ last: 'ApprovalInputShownExactly1765900000000', reverted: true });
        expect(await revertMigration(ds, 'OrgDigestKeys1765800000000')).toEqual({ last: 'OrgDigestKeys1765800000000', reverted: true });
        expect(await revertMigration(ds, 'ToolUseOncePerRun1765710000000')).toEqual({ last: 'ToolUseOncePerRun1765710000000', reverted: true });
        expect(await revertMigration(ds, 'ToolUseUniqueColumn1765700000000')).toEqual({ last: 'ToolUseUniqueColumn1765700000000', reverted: true });
        const [{ column }] = (await ds.query(
          `SELECT count(*)::int AS column FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'tool_calls' AND column_name = 'tool_use_unique'`,
        )) as [{ column: number }];
        expect(column).toBe(0);
      } finally {
        await ds.destroy();
      }
      // ... the previous release serves for a while; this release is deployed again.
      h = await startHarness({ DATABASE_URL: db.url });
      const o = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
      const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
      const path = `/v1/runs/${o.runId}/tool-calls`;
      const first = await h.t.http.post(path).set(bearer(o.agentKey)).send(use);
      const again = await h.t.http.post(path).set(bearer(o.agentKey)).send(use);
      const keyed = await h.t.http.post(path).set(bearer(o.agentKey)).set('Idempotency-Key', 'retry-1').send(use);
      const [{ calls }] = (await h.t.ds.query('SELECT count(*)::int AS calls FROM tool_calls WHERE run_id = $1', [o.runId])) as [{ calls: number }];
      expect({
        first: first.status,
        again: [again.status, again.body.toolCallId === first.body.toolCallId],
        keyed: [keyed.status, keyed.body.toolCallId === first.body.toolCallId],
        calls,
      }).toEqual({ first: 200, again: [200, true], keyed: [200, true], calls: 1 });
    } finally {
      await h?.close();
      await db.drop();
    }
  }, 60_000);
});
