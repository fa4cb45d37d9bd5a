import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerFiniteChecks1765200000000 } from '../../migrations/1765200000000-ledger-finite-checks.js';
import { MIGRATIONS } from '../../migrations/index.js';
import { runMigrations } from '../../src/db/migration-runner.js';
import { migratorOptions } from '../../src/db/db-options.js';
import { adminAuth, startTestApp, type TestApp } from '../support/test-app.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';

/**
 * Migration 1765200000000 leaves ledger events written before it as they are (NOT VALID checks; "verify reports
 * them"). GET /v1/ledger/events still cannot carry them: an event with created_at infinity is a 500 on every page
 * that holds it (for the platform-wide listing, infinity sorts first, so page 1 of every org's listing is a 500), and
 * an event with a seq below 0 that ends a page gets a nextCursor the gateway itself refuses (400): the walk stops there.
 */
describe('ledger events listing over rows kept from before the finite-checks migration', () => {
  let db: ScratchDatabase;
  let t: TestApp | undefined;
  const orgInfinite = randomUUID();
  const orgNegative = randomUUID();
  const orgHealthy = randomUUID();
  const orgMinusInfinite = randomUUID();

  beforeAll(async () => {
    db = await createScratchDatabase('tg_pagination_legacy');
    const before = MIGRATIONS.slice(0, MIGRATIONS.indexOf(LedgerFiniteChecks1765200000000));
    const old = await new DataSource({ ...migratorOptions(db.url), migrations: before }).initialize();
    try {
      await runMigrations(old);
      for (const [name, id] of Object.entries({ orgInfinite, orgNegative, orgHealthy, orgMinusInfinite })) await old.query(`INSERT INTO orgs (id, name) VALUES ($1, $2)`, [id, name]);
      const ev = `INSERT INTO runtime_ledger_events (id, org_id, type, metadata, created_at) VALUES (gen_random_uuid(), $1, 'test.legacy', '{}', $2::timestamptz)`;
      await old.query(ev, [orgInfinite, 'infinity']);
      await old.query(ev, [orgInfinite, '2026-01-01T00:00:00Z']);
      // Two ordinary events and, between them in time, one whose seq was forced below 0.
      await old.query(ev, [orgNegative, '2026-01-01T00:00:03Z']);
      await old.query(
        `INSERT INTO runtime_ledger_events (seq, id, org_id, type, metadata, created_at) OVERRIDING SYSTEM VALUE VALUES (-5, gen_random_uuid(), $1, 'test.legacy', '{}', '2026-01-01T00:00:02Z')`,
        [orgNegative],
      );
      await old.query(ev, [orgNegative, '2026-01-01T00:00:01Z']);
      await old.query(ev, [orgHealthy, '2026-01-01T00:00:00Z']);
      await old.query(ev, [orgMinusInfinite, '2026-01-01T00:00:00Z']);
      await old.query(ev, [orgMinusInfinite, '-infinity']);
    } finally {
      await old.destroy();
    }
    t = await startTestApp({ DATABASE_URL: db.url, LEDGER_SEAL_INTERVAL_MS: '60000' });
  }, 90_000);
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });

  async function walk(query: Record<string, string>): Promise<{ statuses: number[]; types: string[] }> {
    const statuses: number[] = [];
    const types: string[] = [];
    let cursor: string | null = null;
    for (let i = 0; i < 20; i++) {
      const res = await t!.http.get('/v1/ledger/events').query({ ...query, ...(cursor ? { cursor } : {}) }).set(adminAuth);
      statuses.push(res.status);
      if (res.status !== 200) break;
      types.push(...(res.body.items as { type: string }[]).map((e) => e.type));
      cursor = res.body.nextCursor as string | null;
      if (!cursor) break;
    }
    return { statuses, types };
  }

  it("an org holding an event dated infinity lists its events (200), as verify reports it", async () => {
    const res = await t!.http.get('/v1/ledger/events').query({ orgId: orgInfinite }).set(adminAuth);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    // PostgreSQL's spelling, in both fields (toISOString threw), the event kept as every event is.
    expect((res.body.items as { createdAt: string; createdAtExact: string }[]).map((e) => [e.createdAt, e.createdAtExact])).toEqual([
      ['infinity', 'infinity'],
      ['2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000000Z'],
    ]);
  });

  it("the platform-wide listing is not a 500 for every org because one org holds such an event", async () => {
    const res = await t!.http.get('/v1/ledger/events').query({ limit: '200' }).set(adminAuth);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });

  it('a walk through an org holding an event dated -infinity reaches its end (the last page is not a 500)', async () => {
    const { statuses, types } = await walk({ orgId: orgMinusInfinite, limit: '1' });
    expect(statuses.every((s) => s === 200), `statuses ${statuses.join(',')}`).toBe(true);
    expect(types.filter((x) => x === 'test.legacy')).toHaveLength(2);
  });

  it('a walk with limit=1 through an org holding an event with seq < 0 reaches every event (no 400 on its own cursor)', async () => {
    const { statuses, types } = await walk({ orgId: orgNegative, limit: '1' });
    expect(statuses.every((s) => s === 200), `statuses ${statuses.join(',')}`).toBe(true);
    expect(types.filter((x) => x === 'test.legacy')).toHaveLength(3);
  });
});
