import { randomUUID } from 'node:crypto';
import { Logger } from '@nestjs/common';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { LedgerSeqIdentity1765100000000 } from '../../migrations/1765100000000-ledger-seq-identity.js';
import { MIGRATIONS } from '../../migrations/index.js';
import { runMigrations } from '../../src/db/migration-runner.js';
import type { AppConfig } from '../../src/config/app-config.js';
import { dbOptions, migratorOptions } from '../../src/db/db-options.js';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { LedgerVerifierService, VERIFY_CONCURRENCY, verifyOrgChain } from '../../src/ledger/ledger-verifier.service.js';
import { ledgerVerifyCommand } from '../../src/ops/ledger-verify.command.js';
import { waitFor } from '../support/wait.js';
import { adminAuth, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { insertCalls, insertRun, insertRunOnLedger } from './ledger-seed.js';
import { dropScratchDatabase, scratchDatabaseUrl } from '../support/scratch-database.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether each of an org's events of `type` is sealed. */
async function sealedOf(t: TestApp, orgId: string, type?: string): Promise<boolean[]> {
  const rows = (await t.ds.query(`SELECT chain_seq FROM runtime_ledger_events WHERE org_id = $1 AND ($2::text IS NULL OR type = $2) ORDER BY seq`, [
    orgId,
    type ?? null,
  ])) as { chain_seq: string | null }[];
  return rows.map((r) => r.chain_seq !== null);
}

describe('ledger seq: the database hands every event its seq', () => {
  let t: TestApp;
  /** A superuser connection, as an attacker with database access would have. */
  let su: pg.Client;
  const forged: string[] = [];

  beforeAll(async () => {
    t = await startTestApp({ LEDGER_SEAL_INTERVAL_MS: '20' });
    su = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await su.connect();
  });
  afterAll(async () => {
    // The database is shared with the rest of the run: no seq near 2^50 left behind.
    await su.query('BEGIN');
    await su.query('SET LOCAL session_replication_role = replica'); // bypasses the append-only trigger
    await su.query('DELETE FROM runtime_ledger_events WHERE id = ANY($1::uuid[])', [forged]);
    await su.query('COMMIT');
    await su?.end();
    await t?.close();
  });

  it('an insert naming its own seq is refused', async () => {
    const org = await createOrg(t, 'Explicit seq');
    const err = (await t.ds
      .query(`INSERT INTO runtime_ledger_events (seq, id, org_id, type, metadata) VALUES ($1, $2, $3, 'test.forged', '{}')`, [String(2 ** 50), randomUUID(), org])
      .then(() => null, (e: unknown) => e)) as { code?: string } | null;
    expect(err?.code).toBe('428C9'); // generated_always
    const [{ n }] = (await t.ds.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE org_id = $1 AND type = 'test.forged'`, [org])) as { n: number }[];
    expect(n).toBe(0);
  });

  it('a row forced in with a huge seq (OVERRIDING SYSTEM VALUE) is sealed, and the regular passes keep sealing every org’s new events', async () => {
    const org = await createOrg(t, 'Big seq');
    const [{ id }] = (
      await su.query(
        `INSERT INTO runtime_ledger_events (seq, id, org_id, type, metadata) OVERRIDING SYSTEM VALUE VALUES ($1, gen_random_uuid(), $2, 'test.forged', '{}') RETURNING id`,
        [String(2 ** 50), org],
      )
    ).rows as { id: string }[];
    forged.push(id);
    // The passes read it (and, before the fix, took the frontier to 2^50 and overflowed into one full scan).
    await waitFor(async () => (await sealedOf(t, org, 'test.forged'))[0] === true, 'the forced row sealed', 5_000);
    await sleep(300);
    const bystander = await createOrg(t, 'Bystander'); // another org: its org.created event
    await t.app.get(LedgerEventsService).append([{ orgId: org, type: 'test.after', metadata: {} }]);
    // The interval is 20 ms: hundreds of regular passes within the bound. Before the fix these waited for the next full scan (60 s).
    await waitFor(
      async () => (await sealedOf(t, bystander)).join() === 'true' && (await sealedOf(t, org, 'test.after')).join() === 'true',
      'the bystander’s and the org’s new events sealed by regular passes',
      10_000,
    );
    expect(await sealedOf(t, bystander)).toEqual([true]);
    expect(await sealedOf(t, org, 'test.after')).toEqual([true]);
    const v = await t.http.get('/v1/ledger/verify').query({ orgId: org }).set(adminAuth);
    expect(v.body).toMatchObject({ ok: true, checked: 3 }); // org.created, the forced row (hashable, so chained like any), test.after
  });
});

describe('ledger seq migration (bigserial → GENERATED ALWAYS AS IDENTITY)', () => {
  let admin: pg.Client;
  let dbName: string;
  let scratch: DataSource;

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL });
    await admin.connect();
    dbName = `tg_seq_${process.pid}_${Date.now()}`;
    await admin.query(`CREATE DATABASE ${dbName}`);
    const url = new URL(process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL!);
    url.pathname = `/${dbName}`;
    scratch = await new DataSource(migratorOptions(url.toString())).initialize();
  });
  afterAll(async () => {
    await scratch?.destroy();
    try {
      if (admin) await dropScratchDatabase(admin, dbName); // leak-scanned first: the run-wide scan never sees it
    } finally {
      await admin?.end();
    }
  });

  const org = '00000000-0000-4000-8000-000000000001';
  const insert = async (): Promise<number> =>
    Number(((await scratch.query(`INSERT INTO runtime_ledger_events (id, org_id, type) VALUES (gen_random_uuid(), $1, 'test.e') RETURNING seq`, [org])) as { seq: string }[])[0].seq);
  const undoDownToBeforeIt = async () => {
    for (let n = MIGRATIONS.length - MIGRATIONS.indexOf(LedgerSeqIdentity1765100000000); n > 0; n--) await scratch.undoLastMigration({ transaction: 'each' });
  };

  it('continues where the old sequence was (a value taken by a rolled-back insert included), refuses explicit values, and reverts to bigserial at the same place', async () => {
    await runMigrations(scratch);
    await undoDownToBeforeIt();
    expect([await insert(), await insert()]).toEqual([1, 2]);
    await scratch.query(`SELECT nextval('runtime_ledger_events_seq_seq')`); // an insert that rolled back
    await runMigrations(scratch);
    expect(await insert()).toBe(4);
    const err = (await scratch
      .query(`INSERT INTO runtime_ledger_events (seq, id, org_id, type) VALUES (100, gen_random_uuid(), $1, 'test.forged')`, [org])
      .then(() => null, (e: unknown) => e)) as { code?: string } | null;
    expect(err?.code).toBe('428C9');
    expect(await insert()).toBe(5); // the refused insert took nothing
    await undoDownToBeforeIt();
    expect(await insert()).toBe(6);
    // Back to how it was: an explicit value is accepted again (which is what the migration stops).
    await scratch.query(`INSERT INTO runtime_ledger_events (seq, id, org_id, type) VALUES (100, gen_random_uuid(), $1, 'test.forged')`, [org]);
    // Rows with seq inserted explicitly above the sequence: the identity starts past them, so no later insert collides
    // with one; one at 2^53 or more (out of reach of any real ledger) is left where it is.
    await scratch.query(`INSERT INTO runtime_ledger_events (seq, id, org_id, type) VALUES ($1, gen_random_uuid(), $2, 'test.forged')`, [String(2 ** 60), org]);
    await runMigrations(scratch);
    expect(await insert()).toBe(101);
  });
});

describe('sealing as an application role with table privileges only (the usual split from the migrating owner)', () => {
  const role = `tg_ledger_app_${process.pid}`;
  const rolePassword = `pw${randomUUID().replace(/-/g, "")}`;
  let admin: pg.Client;
  let dbName: string;
  /** The migrating role's (the server's superuser here), as the gateway's migrations run. */
  let owner: DataSource;
  /** The application role's: table DML, no privilege on any sequence. */
  let app: DataSource;
  const org = '00000000-0000-4000-8000-000000000001';

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL });
    await admin.connect();
    dbName = `tg_role_${process.pid}_${Date.now()}`;
    await admin.query(`CREATE DATABASE ${dbName}`);
    owner = await new DataSource(migratorOptions(scratchDatabaseUrl(dbName))).initialize();
    await runMigrations(owner);
    await owner.query(`INSERT INTO orgs (id, name) VALUES ($1, 'Least privilege')`, [org]);
    // A password: the embedded server asks for one (the CI machine's server trusts 127.0.0.1, and ignores it).
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD '${rolePassword}'`);
    await owner.query(`GRANT USAGE ON SCHEMA public TO ${role}`);
    await owner.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}`);
    const url = new URL(scratchDatabaseUrl(dbName));
    url.username = role;
    url.password = rolePassword;
    app = await new DataSource(dbOptions(url.toString(), 2)).initialize();
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    await app?.destroy();
    await owner?.destroy();
    try {
      if (admin) await dropScratchDatabase(admin, dbName); // leak-scanned first: the run-wide scan never sees it
      await admin?.query(`DROP ROLE IF EXISTS ${role}`); // its grants went with the database
    } finally {
      await admin?.end();
    }
  });

  /** Appends `n` events as the application role, as the gateway appends them (the identity hands out seq). */
  const append = async (n: number) => {
    for (let i = 0; i < n; i++) await app.query(`INSERT INTO runtime_ledger_events (id, org_id, type, metadata) VALUES (gen_random_uuid(), $1, 'test.step', '{}')`, [org]);
  };
  const unsealed = async () =>
    ((await owner.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE org_id = $1 AND hash IS NULL`, [org])) as { n: number }[])[0].n;

  it('the sealer seals the events the role appended, pass after pass, and verify checks them all', async () => {
    const sealer = new LedgerSealerService(app, {} as AppConfig);
    await append(2);
    // Before the fix: "permission denied for sequence runtime_ledger_events_seq_seq", on every pass.
    expect(await sealer.sealNow()).toBe(2);
    await append(1);
    expect(await sealer.sealNow()).toBe(1);
    expect(await unsealed()).toBe(0);
    expect(await verifyOrgChain(app, org)).toMatchObject({ ok: true, checked: 3 });
  });

  /** Makes ledger_seq_ceiling() unusable for the application role; resolves with what puts it back. */
  const refuseExecute = async (): Promise<() => Promise<unknown>> => {
    await owner.query('REVOKE EXECUTE ON FUNCTION ledger_seq_ceiling() FROM PUBLIC');
    return () => owner.query('GRANT EXECUTE ON FUNCTION ledger_seq_ceiling() TO PUBLIC');
  };
  const nameGoneSequence = async (): Promise<() => Promise<unknown>> => {
    const [{ definition }] = (await owner.query(`SELECT pg_get_functiondef('ledger_seq_ceiling()'::regprocedure) AS definition`)) as [{ definition: string }];
    // As migration 1765400000000 wrote it, with a name a moved schema no longer has (by hand: a string body is checked at creation).
    await owner.transaction(async (m) => {
      await m.query('SET LOCAL check_function_bodies = off');
      await m.query(`CREATE OR REPLACE FUNCTION ledger_seq_ceiling() RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public
                     AS $$ SELECT pg_sequence_last_value('gone.runtime_ledger_events_seq_seq'::regclass) $$`);
    });
    return () => owner.query(definition);
  };

  it.each([
    ['a role refused even ledger_seq_ceiling() (EXECUTE revoked)', refuseExecute, 'ledger_seq_ceiling', 6],
    ['a ledger_seq_ceiling() that no longer works (it names a sequence that is gone)', nameGoneSequence, 'gone', 9],
  ] as const)('%s still seals, without the ceiling, and says so once', async (_, unusable, named, checked) => {
    const warn = vi.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const restore = await unusable();
    try {
      const sealer = new LedgerSealerService(app, {} as AppConfig);
      await append(2);
      expect(await sealer.sealNow()).toBe(2);
      await append(1);
      expect(await sealer.sealNow()).toBe(1);
      expect(await unsealed()).toBe(0);
      expect(await verifyOrgChain(app, org)).toMatchObject({ ok: true, checked });
      const said = warn.mock.calls.map((c) => String(c[0])).filter((m) => m.includes('without a ceiling'));
      expect(said).toHaveLength(1);
      expect(said[0]).toContain(named);
    } finally {
      await restore();
    }
  });
});

describe('GET /v1/ledger/verify under concurrent requests', () => {
  let t: TestApp;
  let su: pg.Client;
  /** Releases the walks a test held, should it fail before it does. */
  let releaseHeld = () => {};

  beforeAll(async () => {
    t = await startTestApp();
    su = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await su.connect();
  });
  afterEach(() => {
    releaseHeld();
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    await su?.end();
    await t?.close();
  });

  async function orgWithChain(n: number): Promise<string> {
    const org = await createOrg(t, 'Verify load');
    await t.app.get(LedgerEventsService).append(Array.from({ length: n }, (_, i) => ({ orgId: org, type: 'test.step', metadata: { i } })));
    return org;
  }

  const verify = (orgId: string) => t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth).then((r) => ({ status: r.status, body: r.body as Record<string, unknown> }));

  /**
   * Every chain walk starts with one sealNow (the periodic sealer never calls it), so its calls count
   * the walks. Each is held until `release`, so the requests are all in before any walk finishes.
   */
  function holdWalks(): { walks: () => number; requests: () => number; release: () => void } {
    const sealer = t.app.get(LedgerSealerService);
    const verifier = t.app.get(LedgerVerifierService);
    const sealNow = sealer.sealNow.bind(sealer);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    releaseHeld = release;
    const walks = vi.spyOn(sealer, 'sealNow').mockImplementation(async () => {
      await gate;
      return sealNow();
    });
    const requests = vi.spyOn(verifier, 'verify');
    return { walks: () => walks.mock.calls.length, requests: () => requests.mock.calls.length, release };
  }

  it('N concurrent verifies of one org walk its chain once and all get its answer', async () => {
    const org = await orgWithChain(50);
    const held = holdWalks();
    const answers = Promise.all(Array.from({ length: 12 }, () => verify(org)));
    await waitFor(() => held.requests() === 12, 'all 12 requests at the verifier', 5_000);
    expect(held.walks()).toBe(1);
    held.release();
    const all = await answers;
    const [{ hash }] = (await t.ds.query(`SELECT hash FROM runtime_ledger_events WHERE org_id = $1 ORDER BY chain_seq DESC LIMIT 1`, [org])) as { hash: string }[];
    expect(all.map((a) => a.status)).toEqual(Array(12).fill(200));
    expect(all.map((a) => a.body)).toEqual(Array(12).fill({ ok: true, checked: 51, headHash: hash }));
    expect(held.walks()).toBe(1);
  });

  it('an answer is not kept past its run: a verify after a tamper walks again and sees it', async () => {
    const org = await orgWithChain(5);
    expect((await verify(org)).body).toMatchObject({ ok: true, checked: 6 });
    await su.query('BEGIN');
    await su.query('SET LOCAL session_replication_role = replica'); // bypasses the append-only trigger
    await su.query(`UPDATE runtime_ledger_events SET metadata = '{"i":99}' WHERE org_id = $1 AND chain_seq = 3`, [org]);
    await su.query('COMMIT');
    expect((await verify(org)).body).toMatchObject({ ok: false, checked: 2, brokenAt: { chainSeq: 3, reason: 'event content does not match its hash' } });
  });

  it(`verifies of different orgs walk at most ${VERIFY_CONCURRENCY} at a time; the others wait, and every answer is its own org's`, async () => {
    const orgs = [await orgWithChain(1), await orgWithChain(2), await orgWithChain(3), await orgWithChain(4), await orgWithChain(5)];
    const held = holdWalks();
    const answers = Promise.all(orgs.map((o) => verify(o)));
    await waitFor(() => held.requests() === orgs.length, 'every request at the verifier', 5_000);
    await sleep(100);
    expect(held.walks()).toBe(VERIFY_CONCURRENCY);
    held.release();
    const all = await answers;
    expect(all.map((a) => a.body)).toEqual(orgs.map((_, i) => expect.objectContaining({ ok: true, checked: i + 2 })));
    expect(held.walks()).toBe(orgs.length);
  });

  it('stays ok while events are appended concurrently and verifies overlap', async () => {
    const orgs = [await orgWithChain(0), await orgWithChain(0)];
    const events = t.app.get(LedgerEventsService);
    let stop = false;
    const writers = Array.from({ length: 4 }, async (_, w) => {
      for (let i = 0; !stop; i++) {
        await events.append(Array.from({ length: 1 + (i % 5) }, (_, k) => ({ orgId: orgs[(w + k) % 2], type: 'test.step', metadata: { w, i, k } })));
      }
    });
    const results: Record<string, unknown>[] = [];
    const deadline = Date.now() + 2_000;
    while (Date.now() < deadline) {
      const round = await Promise.all([...orgs, ...orgs, ...orgs].map((o) => verify(o)));
      results.push(...round.map((r) => r.body));
    }
    stop = true;
    await Promise.all(writers);
    expect(results.filter((r) => r.ok !== true)).toEqual([]);
  });
});

describe('verify checks tool calls against their events', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await startTestApp({ LEDGER_SEAL_INTERVAL_MS: '60000' });
  });
  afterAll(async () => {
    await t?.close();
  });

  /** An org with a run and one call of `status` in it, their rows and their events as the gateway writes them, sealed. */
  async function orgWithCall(status: 'failed' | 'succeeded', errorCode: string | null): Promise<{ org: string; call: string; finalEvent: string }> {
    const org = await createOrg(t, 'Calls');
    const run = await insertRunOnLedger(t.ds, org);
    const [call] = await insertCalls(t.ds, [{ orgId: org, runId: run, status, errorCode, costCents: 5 }]);
    const facts = { toolName: 'order_lookup', action: 'lookup', digest: 'ab'.repeat(32) };
    await t.app.get(LedgerEventsService).append([
      { orgId: org, type: 'tool_call.requested', runId: run, toolCallId: call.id, metadata: facts },
      { orgId: org, type: 'tool_call.started', runId: run, toolCallId: call.id, metadata: facts },
      // As the outcome recorder writes it: with the duration and cost the row holds.
      { orgId: org, type: `tool_call.${status}`, runId: run, toolCallId: call.id, metadata: { ...facts, errorCode, durationMs: 42, costCents: 5 } },
    ]);
    await t.app.get(LedgerSealerService).sealNow();
    const [{ id }] = (await t.ds.query(`SELECT id FROM runtime_ledger_events WHERE tool_call_id = $1 AND type = $2`, [call.id, `tool_call.${status}`])) as { id: string }[];
    return { org, call: call.id, finalEvent: id };
  }

  const verify = async (orgId: string) => (await t.http.get('/v1/ledger/verify').query({ orgId }).set(adminAuth)).body as Record<string, unknown>;
  const cli = async (orgId: string) => {
    const out: string[] = [];
    const code = await ledgerVerifyCommand(['--org', orgId], { DATABASE_URL: process.env.DATABASE_URL }, { out: (l) => out.push(l), err: () => undefined });
    return { code, body: JSON.parse(out[0]) as unknown };
  };

  it('a call whose row agrees with its events verifies ok', async () => {
    for (const [status, code] of [['failed', 'VENDOR_ERROR'], ['succeeded', null]] as const) {
      const { org } = await orgWithCall(status, code);
      expect(await verify(org)).toMatchObject({ ok: true, checked: 5 });
    }
  });

  it('an outcome rewritten with plain SQL (failed → succeeded, no trigger bypass) is a break at the call’s final event, over the API and the CLI', async () => {
    const { org, call, finalEvent } = await orgWithCall('failed', 'VENDOR_ERROR');
    await t.ds.query(`UPDATE tool_calls SET status = 'succeeded', error_code = NULL, cost_cents = 0, output_redacted = '{"forged":true}' WHERE id = $1`, [call]);
    const body = await verify(org);
    expect(body).toEqual({
      ok: false,
      checked: 5,
      brokenAt: { chainSeq: 5, eventId: finalEvent, reason: `tool call ${call} is succeeded, but its last settling event says failed` },
    });
    expect(await cli(org)).toEqual({ code: 1, body });
  });

  it.each([
    ['its error code', `error_code = 'RATE_LIMITED'`, "its error code differs from its last settling event's"],
    ['its action digest', `action_digest = repeat('cd', 32)`, "its action digest differs from its events'"],
    ['a settled call back to running', `status = 'running'`, 'is running, but its last settling event says failed'],
  ])('an edit of %s is a break', async (_what, set, reason) => {
    const { org, call, finalEvent } = await orgWithCall('failed', 'VENDOR_ERROR');
    await t.ds.query(`UPDATE tool_calls SET ${set} WHERE id = $1`, [call]);
    const body = await verify(org);
    expect(body).toMatchObject({ ok: false, brokenAt: { eventId: finalEvent } });
    expect((body.brokenAt as { reason: string }).reason).toContain(call);
    expect((body.brokenAt as { reason: string }).reason).toContain(reason);
  });

  it('a settled call no event settled (a row inserted around the gateway) is a break', async () => {
    const org = await createOrg(t, 'Row only');
    const [call] = await insertCalls(t.ds, [{ orgId: org, runId: await insertRun(t.ds, org), status: 'succeeded' }]);
    expect(await verify(org)).toMatchObject({
      ok: false,
      brokenAt: { chainSeq: 0, eventId: null, reason: `tool call ${call.id} is succeeded, but no event in the ledger settled it` },
    });
  });

  it('finds a break past the first page of calls (5,000), among calls created in the same instant', async () => {
    const org = await createOrg(t, 'Many calls');
    const run = await insertRunOnLedger(t.ds, org);
    const calls = await insertCalls(t.ds, Array.from({ length: 5_002 }, () => ({ orgId: org, runId: run, status: 'running', durationMs: null })));
    const facts = { toolName: 'order_lookup', action: 'lookup', digest: 'ab'.repeat(32) };
    // As the intent of an allowed call writes them: requested, then started (one statement each: 65,535 parameters at most).
    for (const type of ['tool_call.requested', 'tool_call.started']) {
      await t.app.get(LedgerEventsService).append(calls.map((c) => ({ orgId: org, type, runId: run, toolCallId: c.id, metadata: facts })));
    }
    // The planner's statistics, as a database that grew to this size has them (autovacuum's ANALYZE): without them its
    // plans for the walk depended on whether autovacuum had come by yet, 4 s one run and 15 s the next.
    await t.ds.query('ANALYZE tool_calls, runtime_ledger_events');
    expect(await verify(org)).toMatchObject({ ok: true, checked: 10_006 });
    // The last requested event (by time) loses its row.
    const [gone] = (await t.ds.query(
      `SELECT id, tool_call_id FROM runtime_ledger_events WHERE org_id = $1 AND type = 'tool_call.requested' ORDER BY created_at DESC, seq DESC LIMIT 1`,
      [org],
    )) as { id: string; tool_call_id: string }[];
    await t.ds.query(`DELETE FROM tool_calls WHERE id = $1`, [gone.tool_call_id]);
    expect(await verify(org)).toMatchObject({ ok: false, brokenAt: { eventId: gone.id, reason: `tool call ${gone.tool_call_id} has events in the ledger but no row` } });
    // The last call (by time, then id) says it succeeded.
    const [last] = (await t.ds.query(`SELECT id FROM tool_calls WHERE org_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1`, [org])) as { id: string }[];
    await t.ds.query(`UPDATE tool_calls SET status = 'succeeded' WHERE id = $1`, [last.id]);
    expect(await verify(org)).toMatchObject({ ok: false, brokenAt: { eventId: null, reason: `tool call ${last.id} is succeeded, but no event in the ledger settled it` } });
  }, 90_000); // three verifies of 10,006 events and 5,002 calls: about 20 s on a busy 2-core machine

  it('a deleted call row is a break at its tool_call.requested event', async () => {
    const { org, call } = await orgWithCall('succeeded', null);
    await t.ds.query(`DELETE FROM tool_calls WHERE id = $1`, [call]);
    const [requested] = (await t.ds.query(`SELECT id, chain_seq FROM runtime_ledger_events WHERE tool_call_id = $1 AND type = 'tool_call.requested'`, [call])) as {
      id: string; chain_seq: string;
    }[];
    expect(await verify(org)).toEqual({
      ok: false,
      checked: 5,
      brokenAt: { chainSeq: Number(requested.chain_seq), eventId: requested.id, reason: `tool call ${call} has events in the ledger but no row` },
    });
  });
});
