import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerFiniteChecks1765200000000 } from '../../migrations/1765200000000-ledger-finite-checks.js';
import { MIGRATIONS } from '../../migrations/index.js';
import { runMigrations } from '../../src/db/migration-runner.js';
import { migratorOptions } from '../../src/db/db-options.js';
import { eventHash, GENESIS_HASH } from '../../src/ledger/ledger-chain.js';
import { ledgerVerifyCommand } from '../../src/ops/ledger-verify.command.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { insertRun } from './ledger-seed.js';
import { dropScratchDatabase } from '../support/scratch-database.js';

/**
 * Events and calls written around the gateway (a superuser connection) with values its readers
 * cannot carry: a created_at of ±infinity (pg reads an Invalid Date, whose toISOString() throws:
 * every first page of the ledger listing was a 500) and a seq below 0 (never sealed, and the
 * listing's cursor cannot name it). Migration 1765200000000 refuses new ones; rows from before
 * stay (NOT VALID), and verify reports them.
 */
describe('ledger rows forged around the gateway', () => {
  let t: TestApp;
  let su: pg.Client;

  beforeAll(async () => {
    t = await startTestApp({ LEDGER_SEAL_INTERVAL_MS: '60000' });
    su = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await su.connect();
  });
  afterAll(async () => {
    await su?.end();
    await t?.close();
  });

  /** The error an insert or update as superuser gets; each in a transaction rolled back, so nothing stays in the shared database. */
  async function refusal(sql: string, params: unknown[]): Promise<{ code?: string; constraint?: string } | null> {
    await su.query('BEGIN');
    try {
      await su.query(sql, params);
      return null;
    } catch (err) {
      const e = err as { code?: string; constraint?: string };
      return { code: e.code, constraint: e.constraint };
    } finally {
      await su.query('ROLLBACK');
    }
  }

  it('an event with created_at ±infinity or a seq below 0 is refused; the org’s listing stays a 200', async () => {
    const org = await createOrg(t, 'forged events');
    const ops = (await createKey(t, org, 'ops')).key;
    const event = (createdAt: string) =>
      refusal(`INSERT INTO runtime_ledger_events (id, org_id, type, metadata, created_at) VALUES ($1, $2, 'test.forged', '{}', $3)`, [randomUUID(), org, createdAt]);
    const created = { code: '23514', constraint: 'ledger_events_created_at_finite' };
    expect(await event('infinity')).toEqual(created);
    expect(await event('-infinity')).toEqual(created);
    expect(await event('2026-01-01T00:00:00Z')).toBeNull();
    const seq = (n: number) =>
      refusal(`INSERT INTO runtime_ledger_events (seq, id, org_id, type, metadata) OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, 'test.forged', '{}')`, [n, randomUUID(), org]);
    expect(await seq(-5)).toEqual({ code: '23514', constraint: 'ledger_events_seq_not_negative' });
    expect(await seq(0)).toBeNull(); // the sealer reads from seq 0: sealed like any other (see the pre-migration case below)

    const list = await t.http.get('/v1/ledger/events').set(bearer(ops));
    expect(list.status).toBe(200);
    expect(list.body.items.map((e: { type: string }) => e.type)).toEqual(['api_key.created', 'org.created']);
  });

  it('a tool call with any of its timestamps ±infinity is refused, inserted or updated', async () => {
    const org = await createOrg(t, 'forged calls');
    const run = await insertRun(t.ds, org);
    const call = (column: string, value: string) =>
      refusal(
        `INSERT INTO tool_calls (id, org_id, run_id, specialist_id, tool_name, action, status, correlation_id, idempotency_key, tool_use_id, action_digest, input_redacted, ${column})
         VALUES (gen_random_uuid(), $1, $2, 's', 't', 'a', 'succeeded', 'c', gen_random_uuid()::text, gen_random_uuid()::text, 'd', '{}', $3)`,
        [org, run, value],
      );
    const times = { code: '23514', constraint: 'tool_calls_times_finite' };
    for (const column of ['created_at', 'updated_at', 'started_at', 'finished_at']) {
      expect(await call(column, 'infinity'), column).toEqual(times);
      expect(await call(column, '-infinity'), column).toEqual(times);
      expect(await call(column, '2026-01-01T00:00:00Z'), column).toBeNull();
    }
    const [{ id }] = (await t.ds.query(
      `INSERT INTO tool_calls (id, org_id, run_id, specialist_id, tool_name, action, status, correlation_id, idempotency_key, tool_use_id, action_digest, input_redacted)
       VALUES (gen_random_uuid(), $1, $2, 's', 't', 'a', 'succeeded', 'c', 'k', 'u-forged', 'd', '{}') RETURNING id`,
      [org, run],
    )) as { id: string }[];
    expect(await refusal(`UPDATE tool_calls SET finished_at = 'infinity' WHERE id = $1`, [id])).toEqual(times);
    const ops = (await createKey(t, org, 'ops')).key;
    expect((await t.http.get(`/v1/tool-calls/${id}`).set(bearer(ops))).status).toBe(200);
  });
});

/**
 * Rows from before the migration: a database migrated up to the one before it, forged rows
 * written, then the gateway started on it (it applies the migration, which the rows must not
 * block). Verify reports each, where it said intact before: an infinite created_at hashed as
 * null sealed fine and verified fine.
 */
describe('ledger rows forged before the finite-checks migration', () => {
  let holder: pg.Client;
  let dbName: string;
  let url: string;
  let t: TestApp | undefined;
  const orgs = { unsealedInfinite: randomUUID(), sealedInfinite: randomUUID(), negativeSeq: randomUUID(), zeroSeq: randomUUID(), callInfinite: randomUUID(), callOrphan: randomUUID() };
  const ids = { unsealedInfinite: randomUUID(), sealedInfinite: randomUUID(), negativeSeq: randomUUID(), zeroSeq: randomUUID() };
  const calls = { infinite: randomUUID(), orphan: randomUUID() };

  beforeAll(async () => {
    holder = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
    dbName = `tg_forged_${process.pid}_${Date.now()}`;
    await holder.query(`CREATE DATABASE ${dbName}`);
    const u = new URL(process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL!);
    u.pathname = `/${dbName}`;
    url = u.toString();

    const before = MIGRATIONS.slice(0, MIGRATIONS.indexOf(LedgerFiniteChecks1765200000000));
    const old = await new DataSource({ ...migratorOptions(url), migrations: before }).initialize();
    try {
      await runMigrations(old);
      for (const [name, id] of Object.entries(orgs)) await old.query(`INSERT INTO orgs (id, name) VALUES ($1, $2)`, [id, name]);
      const insert = `INSERT INTO runtime_ledger_events (id, org_id, type, metadata, created_at) VALUES ($1, $2, 'test.forged', '{}', $3)`;
      await old.query(insert, [ids.unsealedInfinite, orgs.unsealedInfinite, 'infinity']);
      // Sealed as the sealer did before: createdAt hashed as null (to_char of infinity is NULL).
      const sealed = { id: ids.sealedInfinite, orgId: orgs.sealedInfinite, chainSeq: 1, type: 'test.forged', runId: null, toolCallId: null, actor: null, metadata: {}, createdIso: null };
      await old.query(
        `INSERT INTO runtime_ledger_events (id, org_id, type, metadata, created_at, chain_seq, prev_hash, hash, sealed_at)
         VALUES ($1, $2, 'test.forged', '{}', '-infinity', 1, $3, $4, now())`,
        [ids.sealedInfinite, orgs.sealedInfinite, GENESIS_HASH, eventHash(GENESIS_HASH, sealed)],
      );
      const forcedSeq = `INSERT INTO runtime_ledger_events (seq, id, org_id, type, metadata) OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, 'test.forged', '{}')`;
      await old.query(forcedSeq, [-5, ids.negativeSeq, orgs.negativeSeq]);
      await old.query(forcedSeq, [0, ids.zeroSeq, orgs.zeroSeq]);
      // A running call with an infinite start, and a real orphan of another org (its process died an hour ago).
      const call = `INSERT INTO tool_calls (id, org_id, run_id, specialist_id, tool_name, action, status, correlation_id, idempotency_key, tool_use_id, action_digest, input_redacted, started_at, finished_at)
        VALUES ($1::uuid, $2, $3, 'support', 't', 'a', 'running', 'c', $1::text, $1::text, 'd', '{}', $4::timestamptz, $5::timestamptz)`;
      await old.query(call, [calls.infinite, orgs.callInfinite, await insertRun(old, orgs.callInfinite), '-infinity', 'infinity']);
      await old.query(call, [calls.orphan, orgs.callOrphan, await insertRun(old, orgs.callOrphan), new Date(Date.now() - 3_600_000).toISOString(), null]);
    } finally {
      await old.destroy();
    }
    // Migrates (the new migration over those rows), then seals at start-up.
    t = await startTestApp({ DATABASE_URL: url, LEDGER_SEAL_INTERVAL_MS: '60000' });
  }, 90_000);
  afterAll(async () => {
    await t?.close();
    try {
      if (holder) await dropScratchDatabase(holder, dbName); // leak-scanned first: the run-wide scan never sees it
    } finally {
      await holder?.end();
    }
  });

  const verify = async (orgId: string) => {
    const res = await t!.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth);
    return { status: res.status, body: res.body as Record<string, unknown> };
  };

  it('the migration applies over them, and the constraints refuse new ones', async () => {
    const [{ n }] = (await t!.ds.query(`SELECT count(*)::int AS n FROM typeorm_migrations WHERE name = 'LedgerFiniteChecks1765200000000'`)) as { n: number }[];
    expect(n).toBe(1);
    await expect(
      t!.ds.query(`INSERT INTO runtime_ledger_events (id, org_id, type, metadata, created_at) VALUES ($1, $2, 'test.forged', '{}', 'infinity')`, [randomUUID(), orgs.zeroSeq]),
    ).rejects.toMatchObject({ code: '23514' });
  });

  it('tool calls with infinite times are repaired and the constraint validated: one such row cannot stop the orphan sweep of every org', async () => {
    const rows = (await t!.ds.query(
      `SELECT id, status, isfinite(started_at) AND isfinite(finished_at) AS finite FROM tool_calls WHERE id IN ($1, $2)`,
      [calls.infinite, calls.orphan],
    )) as { id: string; status: string; finite: boolean | null }[];
    expect(rows.find((r) => r.id === calls.infinite)).toMatchObject({ finite: true });
    // The start-up sweep (one UPDATE across every org) marked the real orphan.
    expect(rows.find((r) => r.id === calls.orphan)?.status).toBe('indeterminate');
    const [{ validated }] = (await t!.ds.query(`SELECT convalidated AS validated FROM pg_constraint WHERE conname = 'tool_calls_times_finite'`)) as {
      validated: boolean;
    }[];
    expect(validated).toBe(true);
  });

  it('an unsealed event with created_at infinity is never sealed, and verify reports it (API and CLI)', async () => {
    const res = await verify(orgs.unsealedInfinite);
    expect(res).toEqual({ status: 200, body: { ok: false, checked: 0, brokenAt: { chainSeq: 0, eventId: ids.unsealedInfinite, reason: expect.stringMatching(/^unsealed event cannot be hashed/) } } });
    const [row] = (await t!.ds.query('SELECT chain_seq, hash FROM runtime_ledger_events WHERE id = $1', [ids.unsealedInfinite])) as { chain_seq: string | null; hash: string | null }[];
    expect(row).toEqual({ chain_seq: null, hash: null });
    const out: string[] = [];
    const code = await ledgerVerifyCommand(['--org', orgs.unsealedInfinite], { DATABASE_URL: url }, { out: (l) => out.push(l), err: () => undefined });
    expect(code).toBe(1);
    expect(JSON.parse(out[0])).toEqual(res.body);
  });

  it('an event sealed with created_at -infinity (hashed as null) is a break at its position, and the break is logged as an error', async () => {
    const from = t!.logs.length;
    expect(await verify(orgs.sealedInfinite)).toEqual({
      status: 200,
      body: { ok: false, checked: 0, brokenAt: { chainSeq: 1, eventId: ids.sealedInfinite, reason: expect.stringMatching(/cannot be hashed/) } },
    });
    const logged = t!.logs.slice(from).flatMap((c) => c.split('\n')).filter((l) => l.includes('ledger chain broken')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(logged).toEqual([expect.objectContaining({ level: 50, orgId: orgs.sealedInfinite, brokenAt: expect.objectContaining({ chainSeq: 1, eventId: ids.sealedInfinite }) })]);
  });

  it('an unsealed event below seq 0 is reported; one at seq 0 is sealed like any other', async () => {
    expect(await verify(orgs.negativeSeq)).toEqual({
      status: 200,
      body: { ok: false, checked: 0, brokenAt: { chainSeq: 0, eventId: ids.negativeSeq, reason: expect.stringMatching(/below seq 0/) } },
    });
    expect(await verify(orgs.zeroSeq)).toEqual({ status: 200, body: { ok: true, checked: 1, headHash: expect.stringMatching(/^[0-9a-f]{64}$/) } });
  });
});
