import pg from 'pg';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runMigrations } from '../../src/bootstrap.js';
import { dbOptions } from '../../src/db/db-options.js';

/** The advisory lock key runMigrations serialises replicas on (bootstrap.ts). */
const MIGRATION_LOCK = 7_413_920_552;

describe('migrations when several replicas start together', () => {
  let holder: pg.Client;
  let ds: DataSource;

  beforeAll(async () => {
    holder = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
    // Two pooled connections (the lock's and the migrations'), and a statement timeout far shorter than a migration can take.
    const base = dbOptions(process.env.DATABASE_URL!, 2);
    ds = await new DataSource({ ...base, extra: { ...(base.extra as object), statement_timeout: 300 } } as typeof base).initialize();
  });
  afterAll(async () => {
    await holder?.end();
    await ds?.destroy();
  });

  it('a replica waits for the one migrating, past its statement timeout, and its pooled connection gets the timeout back', async () => {
    await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]); // "another replica is migrating"
    let settled = false;
    const waiting = runMigrations(ds).finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 1_000)); // more than three statement timeouts
    expect(settled).toBe(false);
    await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    await waiting; // resolves: it neither crashed nor gave up

    // Both pooled connections, held at once so each is looked at.
    const runners = [ds.createQueryRunner(), ds.createQueryRunner()];
    try {
      const shown = await Promise.all(runners.map(async (qr) => ((await qr.query('SHOW statement_timeout')) as { statement_timeout: string }[])[0].statement_timeout));
      expect(shown).toEqual(['300ms', '300ms']);
    } finally {
      await Promise.all(runners.map((qr) => qr.release()));
    }
  });
});
