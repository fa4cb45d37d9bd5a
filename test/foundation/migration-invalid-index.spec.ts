import pg from 'pg';
import { DataSource } from 'typeorm';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../migrations/index.js';
import { migratorOptions } from '../../src/db/db-options.js';
import { runMigrations } from '../../src/db/migration-runner.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { startTestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

const INDEX = 'tool_calls_corr_idx';
const INVALID_WARNING = /invalid index\(es\) tool_calls_corr_idx: left by an interrupted CREATE INDEX CONCURRENTLY/;

let db: ScratchDatabase | undefined;
afterEach(async () => {
  await db?.drop();
  db = undefined;
});

const migrate = async (url: string, migrations: typeof MIGRATIONS): Promise<string[]> => {
  const ds = await new DataSource({ ...migratorOptions(url), migrations }).initialize();
  try {
    return await runMigrations(ds);
  } finally {
    await ds.destroy();
  }
};

const validity = async (url: string): Promise<boolean[]> => {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ v: boolean }>(`SELECT i.indisvalid AS v FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = $1`, [INDEX]);
    return rows.map((r) => r.v);
  } finally {
    await c.end();
  }
};

/**
 * What an operator's hand build of the index looks like when it is interrupted (as the migration's comment tells them
 * to build it on a large live table): the concurrent build, waiting for a writer's transaction on the table, has its
 * session ended. PostgreSQL leaves the index, INVALID.
 */
async function interruptedConcurrentBuild(url: string): Promise<void> {
  const writer = new pg.Client({ connectionString: url });
  const builder = new pg.Client({ connectionString: url });
  builder.on('error', () => undefined);
  await writer.connect();
  await builder.connect();
  try {
    await writer.query('BEGIN');
    await writer.query('LOCK TABLE tool_calls IN ROW EXCLUSIVE MODE');
    const { rows } = await builder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const build = builder.query(`CREATE INDEX CONCURRENTLY ${INDEX} ON tool_calls (correlation_id)`).then(
      () => 'built',
      () => 'interrupted',
    );
    await waitFor(
      async () => (await writer.query(`SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1`, [rows[0].pid])).rows[0]?.wait_event_type === 'Lock' || undefined,
      'the concurrent build waiting for the writer',
    );
    await writer.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
    expect(await build).toBe('interrupted');
    await writer.query('COMMIT');
  } finally {
    await writer.end();
    await builder.end().catch(() => undefined);
  }
  expect(await validity(url)).toEqual([false]);
}

/**
 * An interrupted CREATE INDEX CONCURRENTLY leaves an INVALID index of its name: maintained on every write, used by no
 * plan. The ledger indexes' migration (CREATE INDEX IF NOT EXISTS) took such a hand-built one for built, recorded
 * itself as applied and said the migrations were up to date, and nothing ever said otherwise.
 */
describe('an index left invalid by an interrupted concurrent build', () => {
  it('is dropped and built again by the migration that creates it', async () => {
    db = await createScratchDatabase('tg_mig_invalid_idx');
    // The schema as a deployment before LedgerQueryIndexes1764600000000 has it; the operator pre-builds one index.
    await migrate(db.url, [MIGRATIONS[0]!]);
    await interruptedConcurrentBuild(db.url);
    expect(await migrate(db.url, MIGRATIONS)).toContain('LedgerQueryIndexes1764600000000');
    expect(await validity(db.url)).toEqual([true]);
  }, 60_000);

  it('left after its migration ran, is said at start-up with the fix; a schema without one says nothing', async () => {
    db = await createScratchDatabase('tg_mig_invalid_idx');
    await migrate(db.url, MIGRATIONS);
    const clean = await startTestApp({ DATABASE_URL: db.url });
    const quiet = clean.logs.filter((l) => /invalid index/.test(l));
    await clean.close();
    expect(quiet).toEqual([]);

    // An operator's rebuild of it (a REINDEX done as drop and create, concurrently) is interrupted.
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    await c.query(`DROP INDEX ${INDEX}`);
    await c.end();
    await interruptedConcurrentBuild(db.url);
    const t = await startTestApp({ DATABASE_URL: db.url });
    const warned = t.logs.filter((l) => INVALID_WARNING.test(l));
    await t.close();
    expect(warned).toHaveLength(1);
    expect(JSON.parse(warned[0]!)).toMatchObject({ level: 40, context: 'Database' });
    expect(warned[0]).toContain(`REINDEX INDEX CONCURRENTLY`);
  }, 90_000);

  it('one still being built by hand is left to its builder: readers of tool_calls are not held behind a DROP waiting for it', async () => {
    db = await createScratchDatabase('tg_mig_invalid_idx');
    const first = await new DataSource({ ...migratorOptions(db.url), migrations: [MIGRATIONS[0]!] }).initialize();
    await runMigrations(first);
    await first.destroy();

    const writer = new pg.Client({ connectionString: db.url });
    const builder = new pg.Client({ connectionString: db.url });
    const reader = new pg.Client({ connectionString: db.url });
    builder.on('error', () => undefined);
    await Promise.all([writer.connect(), builder.connect(), reader.connect()]);
    const ds = await new DataSource({ ...migratorOptions(db.url), migrations: MIGRATIONS }).initialize();
    try {
      // A long transaction on the table, as a live one has: the hand build waits for it, its index INVALID meanwhile.
      await writer.query('BEGIN');
      await writer.query('LOCK TABLE tool_calls IN ROW EXCLUSIVE MODE');
      const { rows } = await builder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const build = builder.query('CREATE INDEX CONCURRENTLY tool_calls_corr_idx ON tool_calls (correlation_id)').then(() => 'built', (e: Error) => `failed: ${e.message}`);
      await waitFor(async () => (await writer.query('SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1', [rows[0].pid])).rows[0]?.wait_event_type === 'Lock' || undefined, 'build waiting');

      const migration = runMigrations(ds, { tableLockAttempts: 1, tableLockTimeoutMs: 2_000 }).then((m) => `applied ${m.length}`, (e: Error) => `${e.name}: ${e.message.slice(0, 100)}`);
      await new Promise((r) => setTimeout(r, 300));
      const t = performance.now();
      await reader.query('SELECT count(*) FROM tool_calls');
      const readerMs = performance.now() - t;
      const outcome = await migration;
      await writer.query('COMMIT');
      expect(readerMs).toBeLessThan(500); // 1.7 s behind the DROP's wait (the CREATE's SHARE lock holds back no reader)
      expect(outcome).toMatch(/TableLockTimeout|lock/i); // the CREATE still waits for the long transaction, as before
      expect(await build).toBe('built'); // the hand build was not disturbed
    } finally {
      await ds.destroy();
      await Promise.all([writer.end(), builder.end().catch(() => undefined), reader.end()]);
    }
  }, 60_000);
});
