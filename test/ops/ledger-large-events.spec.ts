/**
 * The sealer and the verifier parse and hash a page of events in one go. Pages were counted in rows only (2,000 and
 * 5,000), and an org admin can make every event of its own some 120 KB (tool_permissions.changed carries the whole
 * diff of a 64 KiB PUT): a growth reviewer's 5,000 such events were a 617 MB page and blocked the event loop 7.9 s,
 * every org's calls waiting. A page now ends at the event that reaches PAGE_STORED_BYTES (4 MiB as stored).
 *
 * Measured here: the JSON each query hands the process. The events are seeded in SQL (as the PUTs would write them,
 * some 40 MB in all), the sealer and the verifier run on a DataSource whose queries are watched, and no gateway runs,
 * so no other sealer takes the events first.
 */
import { randomUUID } from 'node:crypto';
import { DataSource, type EntityManager } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppConfig } from '../../src/config/app-config.js';
import { runMigrations } from '../../src/db/migration-runner.js';
import { dbOptions, migratorOptions } from '../../src/db/db-options.js';
import { PAGE_STORED_BYTES } from '../../src/ledger/ledger-chain.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { verifyOrgChain } from '../../src/ledger/ledger-verifier.service.js';

const EVENTS = 200;
/** Each event's metadata: random hex, which compresses to about half, some 200 KB of JSON. */
const HEX_PIECES = 6_000;

describe('ledger pages of large events', () => {
  let ds: DataSource;
  const orgId = randomUUID();
  /** The JSON bytes of actor and metadata in each query answer that carried events. */
  const pages: number[] = [];
  const watch = (rows: unknown): unknown => {
    if (Array.isArray(rows) && rows.length > 0 && typeof rows[0] === 'object' && rows[0] !== null && 'metadata' in rows[0]) {
      pages.push(rows.reduce((n: number, r: { metadata: unknown; actor: unknown }) => n + JSON.stringify(r.metadata).length + JSON.stringify(r.actor ?? null).length, 0));
    }
    return rows;
  };
  const watched = (m: EntityManager): EntityManager =>
    new Proxy(m, { get: (target, p) => (p === 'query' ? async (sql: string, params?: unknown[]) => watch(await target.query(sql, params)) : Reflect.get(target, p, target)) });
  const watchedDs = (): DataSource =>
    new Proxy(ds, {
      get: (target, p) =>
        p === 'transaction'
          ? (fn: (m: EntityManager) => Promise<unknown>) => target.transaction((m) => fn(watched(m)))
          : p === 'query'
            ? async (sql: string, params?: unknown[]) => watch(await target.query(sql, params))
            : Reflect.get(target, p, target),
    });

  beforeAll(async () => {
    const migrator = await new DataSource(migratorOptions(process.env.DATABASE_URL!)).initialize(); // the first gateway of the run migrates
    try {
      await runMigrations(migrator);
    } finally {
      await migrator.destroy();
    }
    ds = await new DataSource(dbOptions(process.env.DATABASE_URL!, 2)).initialize();
    await ds.query(`INSERT INTO orgs (id, name) VALUES ($1, 'Large Events Co')`, [orgId]);
    await ds.query(
      `INSERT INTO runtime_ledger_events (id, org_id, type, actor, metadata)
       SELECT gen_random_uuid(), $1, 'tool_permissions.changed', '{"keyId": null, "role": "admin"}'::jsonb,
              jsonb_build_object('added', (SELECT string_agg(md5(p::text || g::text || random()::text), '') FROM generate_series(1, $3::int) p WHERE g > 0))
         FROM generate_series(1, $2::int) g`,
      [orgId, EVENTS, HEX_PIECES],
    );
  }, 120_000);
  afterAll(async () => {
    if (!ds) return;
    // Some 40 MB of random hex is no part of what the run-wide leak scan needs to read.
    await ds.query('ALTER TABLE runtime_ledger_events DISABLE TRIGGER ledger_events_no_update');
    try {
      await ds.query('DELETE FROM runtime_ledger_events WHERE org_id = $1', [orgId]);
    } finally {
      await ds.query('ALTER TABLE runtime_ledger_events ENABLE TRIGGER ledger_events_no_update');
      await ds.destroy();
    }
  });

  it('the sealer seals them all in pages of at most some 4 MiB as stored, not one page of every event', async () => {
    pages.length = 0;
    await new LedgerSealerService(watchedDs(), {} as AppConfig).sealNow();
    const [{ unsealed }] = (await ds.query(`SELECT count(*)::int AS unsealed FROM runtime_ledger_events WHERE org_id = $1 AND hash IS NULL`, [orgId])) as { unsealed: number }[];
    expect(unsealed).toBe(0);
    const total = EVENTS * HEX_PIECES * 32;
    expect(Math.max(...pages), `pages of ${pages.join(', ')} bytes`).toBeLessThan(4 * PAGE_STORED_BYTES); // before: one page of all (≈ 38 MB)
    expect(pages.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(total);
  }, 120_000);

  it('the verifier walks the chain in such pages too, and finds it whole', async () => {
    pages.length = 0;
    const result = await verifyOrgChain(watchedDs(), orgId);
    expect(result).toMatchObject({ ok: true, checked: EVENTS });
    expect(pages.length).toBeGreaterThan(2);
    expect(Math.max(...pages), `pages of ${pages.join(', ')} bytes`).toBeLessThan(4 * PAGE_STORED_BYTES); // before: one page of all
  }, 120_000);

  it('the walk goes on past a page boundary: a change to the chain\'s last event is found', async () => {
    // Sealed rows refuse updates (ledger_events_no_update): gone around, as an attacker with the database would.
    await ds.query('ALTER TABLE runtime_ledger_events DISABLE TRIGGER ledger_events_no_update');
    try {
      await ds.query(
        `UPDATE runtime_ledger_events SET metadata = '{"added": "changed"}'::jsonb
          WHERE id = (SELECT id FROM runtime_ledger_events WHERE org_id = $1 ORDER BY chain_seq DESC LIMIT 1)`,
        [orgId],
      );
    } finally {
      await ds.query('ALTER TABLE runtime_ledger_events ENABLE TRIGGER ledger_events_no_update');
    }
    const broken = await verifyOrgChain(ds, orgId);
    expect(broken).toMatchObject({ ok: false, checked: EVENTS - 1, brokenAt: { chainSeq: EVENTS, reason: 'event content does not match its hash' } });
  }, 120_000);
});
