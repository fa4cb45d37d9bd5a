import 'reflect-metadata';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import type { INestApplication } from '@nestjs/common';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/auth/api-key-hash.js';
import { ApiKeysService } from '../../src/auth/api-keys.service.js';
import { createGateway } from '../../src/bootstrap.js';
import { REVOKE_TURN_SQL } from '../../src/db/advisory-locks.js';
import { Clock } from '../../src/common/clock.js';
import { loadConfig, type AppConfig } from '../../src/config/app-config.js';
import { ConfigError } from '../../src/config/config.schema.js';
import { LedgerEventsService } from '../../src/ledger/ledger-events.service.js';
import { OrgScopeService } from '../../src/orgs/org-scope.service.js';
import { OrgsService } from '../../src/orgs/orgs.service.js';
import { captureLogs } from '../../src/logging/logging.js';
import { teeChildToRunLog } from '../support/run-log.js'; // also: this file's in-process logs go to the run log
import { recordApiKey } from '../support/api-keys.js';
import { dropScratchDatabase } from '../support/scratch-database.js';
import { waitsOnLock } from '../support/lock-waits.js';
import { withQueryHook } from '../support/query-hook.js';
import { waitFor } from '../support/wait.js';
import { TEST_MASTER_KEY } from '../support/secrets.js';

/**
 * Several replicas starting together on one database each run ensureBootstrapKey.
 * A database of its own: the generated-key case needs a table with no live
 * generated key, which the shared test database cannot promise.
 */
describe('bootstrap admin key: replicas starting together', () => {
  const server = new URL(process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL!);
  const dbName = `tg_bootkey_${process.pid}_${Date.now()}`;
  let admin: pg.Client;
  let app: INestApplication;
  let config: AppConfig;
  let ds: DataSource;

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: server.toString() });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    const db = new URL(server.toString());
    db.pathname = `/${dbName}`;
    config = loadConfig({ NODE_ENV: 'test', DATABASE_URL: db.toString(), MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY, LOG_LEVEL: 'warn', DATA_DIR: '.tmp/data-bootkey' });
    ({ app } = await createGateway(config));
    ds = app.get(DataSource);
  });
  afterAll(async () => {
    await app?.close();
    try {
      if (admin) await dropScratchDatabase(admin, dbName); // leak-scanned first: the run-wide scan never sees it
    } finally {
      await admin?.end();
    }
  });

  /** `n` services as `n` replicas would have them, all calling ensureBootstrapKey at once. */
  async function race(n: number, overrides: Partial<AppConfig>): Promise<PromiseSettledResult<{ generatedKey?: string }>[]> {
    const replicas = Array.from({ length: n }, () => new ApiKeysService(ds, app.get(LedgerEventsService), app.get(OrgScopeService), { ...config, ...overrides }, app.get(Clock)));
    // The configured and the generated keys are secrets the run-wide leak scan looks for too.
    if (overrides.BOOTSTRAP_ADMIN_KEY) recordApiKey(overrides.BOOTSTRAP_ADMIN_KEY, 'admin', 'BOOTSTRAP_ADMIN_KEY');
    try {
      const results = await Promise.allSettled(replicas.map((r) => r.ensureBootstrapKey()));
      for (const r of results) if (r.status === 'fulfilled' && r.value.generatedKey) recordApiKey(r.value.generatedKey, 'admin', 'generated bootstrap key');
      return results;
    } finally {
      await Promise.all(replicas.map((r) => r.beforeApplicationShutdown()));
    }
  }

  it('with a new BOOTSTRAP_ADMIN_KEY: every replica starts and the key is stored once', async () => {
    for (let round = 0; round < 5; round++) {
      const key = `tgw_race_${randomBytes(16).toString('hex')}`;
      const results = await race(6, { BOOTSTRAP_ADMIN_KEY: key });
      const failures = results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason));
      expect(failures).toEqual([]);
      const rows = (await ds.query('SELECT count(*)::int AS n FROM api_keys WHERE key_hash = $1', [hashApiKey(key)])) as { n: number }[];
      expect(rows[0].n).toBe(1);
      const gw = app.get(ApiKeysService);
      expect(await gw.authenticate(key)).toMatchObject({ orgId: null, role: 'admin' });
    }
  });

  it('a changed BOOTSTRAP_ADMIN_KEY revokes the earlier one (with an event); restarting with the same key revokes nothing', async () => {
    const a = `tgw_old_${randomBytes(16).toString('hex')}`;
    const b = `tgw_new_${randomBytes(16).toString('hex')}`;
    await race(1, { BOOTSTRAP_ADMIN_KEY: a });
    await race(3, { BOOTSTRAP_ADMIN_KEY: b });
    await race(2, { BOOTSTRAP_ADMIN_KEY: b });
    const state = async (key: string) =>
      ((await ds.query('SELECT id, revoked_at FROM api_keys WHERE key_hash = $1', [hashApiKey(key)])) as { id: string; revoked_at: Date | null }[])[0];
    const [oldRow, newRow] = [await state(a), await state(b)];
    expect(oldRow.revoked_at).not.toBeNull();
    expect(newRow.revoked_at).toBeNull();
    const fresh = new ApiKeysService(ds, app.get(LedgerEventsService), app.get(OrgScopeService), config, app.get(Clock)); // no cached lookups
    try {
      expect(await fresh.authenticate(a)).toBeNull();
      expect(await fresh.authenticate(b)).toMatchObject({ orgId: null, role: 'admin' });
    } finally {
      await fresh.beforeApplicationShutdown();
    }
    const events = (await ds.query(`SELECT metadata FROM runtime_ledger_events WHERE type = 'api_key.revoked' AND metadata->>'apiKeyId' = $1`, [oldRow.id])) as { metadata: Record<string, unknown> }[];
    expect(events).toHaveLength(1);
    expect(events[0].metadata).toMatchObject({ reason: 'BOOTSTRAP_ADMIN_KEY changed' });
  });

  it('the key added at start-up (configured or generated) gets one api_key.created event, as an API-created key does; a restart adds none', async () => {
    const createdEvents = async (key: string) =>
      (await ds.query(
        `SELECT e.org_id, e.actor, e.metadata FROM runtime_ledger_events e JOIN api_keys k ON e.metadata->>'apiKeyId' = k.id::text
          WHERE e.type = 'api_key.created' AND k.key_hash = $1`,
        [hashApiKey(key)],
      )) as { org_id: string; actor: unknown; metadata: Record<string, unknown> }[];
    const configured = `tgw_audit_${randomBytes(16).toString('hex')}`;
    await race(3, { BOOTSTRAP_ADMIN_KEY: configured });
    await race(2, { BOOTSTRAP_ADMIN_KEY: configured });
    const events = await createdEvents(configured);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ org_id: '00000000-0000-0000-0000-000000000000', actor: null, metadata: { role: 'admin', orgId: null } });

    await revokePlatformAdmins();
    const results = await race(3, { BOOTSTRAP_ADMIN_KEY: undefined });
    await race(2, { BOOTSTRAP_ADMIN_KEY: undefined });
    const [generated] = results.flatMap((r) => (r.status === 'fulfilled' && r.value.generatedKey ? [r.value.generatedKey] : []));
    expect(await createdEvents(generated)).toHaveLength(1);
  });

  it('in production without BOOTSTRAP_ADMIN_KEY: generates nothing, and warns when no platform admin key exists (nobody could create an org or a key)', async () => {
    const warned = async (): Promise<boolean> => {
      const logs = captureLogs();
      try {
        const [result] = await race(1, { NODE_ENV: 'production', BOOTSTRAP_ADMIN_KEY: undefined });
        expect(result).toEqual({ status: 'fulfilled', value: {} });
      } finally {
        logs.stop();
      }
      return logs.lines.some((l) => l.includes('no platform admin key exists and BOOTSTRAP_ADMIN_KEY is not set'));
    };
    expect(await warned()).toBe(false); // the bootstrap key of this database's gateway is one
    const revoked = (await ds.query(`UPDATE api_keys SET revoked_at = now() WHERE org_id IS NULL AND role = 'admin' AND revoked_at IS NULL RETURNING id`)) as [
      { id: string }[],
      number,
    ];
    try {
      expect(await warned()).toBe(true);
      expect((await ds.query(`SELECT count(*)::int AS n FROM api_keys WHERE org_id IS NULL AND role = 'admin' AND revoked_at IS NULL`))[0].n).toBe(0);
    } finally {
      await ds.query(`UPDATE api_keys SET revoked_at = NULL WHERE id = ANY($1::uuid[])`, [revoked[0].map((r) => r.id)]);
    }
  });

  it('without BOOTSTRAP_ADMIN_KEY: exactly one replica generates (and prints) a key, none crashes', async () => {
    for (let round = 0; round < 5; round++) {
      await revokePlatformAdmins();
      const results = await race(6, { BOOTSTRAP_ADMIN_KEY: undefined });
      const failures = results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason));
      expect(failures).toEqual([]);
      const generated = results.flatMap((r) => (r.status === 'fulfilled' && r.value.generatedKey ? [r.value.generatedKey] : []));
      expect(generated).toHaveLength(1);
      const live = (await ds.query(`SELECT count(*)::int AS n FROM api_keys WHERE name = 'bootstrap admin (generated)' AND revoked_at IS NULL`)) as { n: number }[];
      expect(live[0].n).toBe(1);
    }
  });

  /** A key is generated only while no platform admin key is live. */
  const revokePlatformAdmins = () => ds.query(`UPDATE api_keys SET revoked_at = now() WHERE org_id IS NULL AND role = 'admin' AND revoked_at IS NULL`);

  it('a generated key revoked by an admin (who made their own platform admin key with it) stays revoked: the next start generates none', async () => {
    await revokePlatformAdmins();
    const [gen] = await race(1, { BOOTSTRAP_ADMIN_KEY: undefined });
    const generated = (gen as PromiseFulfilledResult<{ generatedKey?: string }>).value.generatedKey!;
    expect(generated).toMatch(/^tgw_/);
    // The admin's own key, then the generated one revoked (it was printed and saved under DATA_DIR).
    const own = `tgw_own_${randomBytes(16).toString('hex')}`;
    recordApiKey(own, 'admin', 'platform admin key made with the generated one');
    await ds.query(`INSERT INTO api_keys (id, org_id, role, name, key_hash, key_prefix) VALUES (gen_random_uuid(), NULL, 'admin', 'ops lead', $1, 'tgw_ow')`, [hashApiKey(own)]);
    await ds.query(`UPDATE api_keys SET revoked_at = now() WHERE key_hash = $1`, [hashApiKey(generated)]);
    const again = await race(2, { BOOTSTRAP_ADMIN_KEY: undefined });
    expect(again.map((r) => (r.status === 'fulfilled' ? r.value : r.reason))).toEqual([{}, {}]);
    expect((await liveState(generated)).live).toBe(false);
  });

  const liveState = async (key: string) =>
    ((await ds.query('SELECT revoked_at IS NULL AS live, key_prefix FROM api_keys WHERE key_hash = $1', [hashApiKey(key)])) as { live: boolean; key_prefix: string }[])[0];

  it('an old value restarting after a new one (rolling deploy, rollback) revokes nothing and says so: the newer key keeps working', async () => {
    const a = `tgw_A_${randomBytes(16).toString('hex')}`;
    const b = `tgw_B_${randomBytes(16).toString('hex')}`;
    await race(1, { BOOTSTRAP_ADMIN_KEY: a });
    await race(1, { BOOTSTRAP_ADMIN_KEY: b });
    const logs = captureLogs();
    try {
      await race(2, { BOOTSTRAP_ADMIN_KEY: a });
    } finally {
      logs.stop();
    }
    expect([(await liveState(a)).live, (await liveState(b)).live]).toEqual([false, true]);
    expect(logs.lines.some((l) => l.includes('BOOTSTRAP_ADMIN_KEY names a key that has been revoked'))).toBe(true);
    expect(logs.lines.join('\n')).not.toContain(a.slice(4, 16));
  });

  it('a BOOTSTRAP_ADMIN_KEY that is the text of an existing non-admin key (an ops key, an org admin key) is not used, revokes nothing and says so', async () => {
    const b = `tgw_B_${randomBytes(16).toString('hex')}`;
    await race(1, { BOOTSTRAP_ADMIN_KEY: b });
    const [{ id: adminId }] = (await ds.query('SELECT id FROM api_keys WHERE key_hash = $1', [hashApiKey(b)])) as { id: string }[];
    const me = { keyId: adminId, orgId: null, role: 'admin' as const };
    const org = await app.get(OrgsService).create(me, { name: 'bootstrap wrong key' });
    const keys = app.get(ApiKeysService);
    for (const pasted of [await keys.create(me, { orgId: null, role: 'ops', name: 'ops' }), await keys.create(me, { orgId: org.id, role: 'admin', name: 'org admin' })]) {
      recordApiKey(pasted.key, pasted.role, 'ApiKeysService.create');
      const before = (await ds.query('SELECT org_id, role, key_prefix, revoked_at FROM api_keys WHERE id = $1', [pasted.id])) as unknown[];
      const logs = captureLogs();
      try {
        await race(2, { BOOTSTRAP_ADMIN_KEY: pasted.key });
      } finally {
        logs.stop();
      }
      // The earlier bootstrap admin key still works (revoked, the platform would have no admin key); the pasted key's row is untouched.
      expect((await liveState(b)).live).toBe(true);
      expect(await ds.query('SELECT org_id, role, key_prefix, revoked_at FROM api_keys WHERE id = $1', [pasted.id])).toEqual(before);
      expect(logs.lines.some((l) => l.includes('BOOTSTRAP_ADMIN_KEY is the text of an existing key that is not a platform admin key'))).toBe(true);
      expect(logs.lines.join('\n')).not.toContain(pasted.key.slice(4, 16));
    }
  });

  it('setting BOOTSTRAP_ADMIN_KEY revokes a key generated before (it was printed to a log), with an event', async () => {
    await revokePlatformAdmins();
    const [gen] = await race(1, { BOOTSTRAP_ADMIN_KEY: undefined });
    const generated = (gen as PromiseFulfilledResult<{ generatedKey?: string }>).value.generatedKey!;
    expect((await liveState(generated)).live).toBe(true);
    await race(1, { BOOTSTRAP_ADMIN_KEY: `tgw_C_${randomBytes(16).toString('hex')}` });
    expect((await liveState(generated)).live).toBe(false);
    const [row] = (await ds.query('SELECT id FROM api_keys WHERE key_hash = $1', [hashApiKey(generated)])) as { id: string }[];
    const events = (await ds.query(`SELECT metadata FROM runtime_ledger_events WHERE type = 'api_key.revoked' AND metadata->>'apiKeyId' = $1`, [row.id])) as {
      metadata: Record<string, unknown>;
    }[];
    expect(events.map((e) => e.metadata.reason)).toEqual(['BOOTSTRAP_ADMIN_KEY set']);
  });

  it('retiring a replaced bootstrap key takes its revocation\'s turn: a write the old key begins meanwhile is refused, none is recorded after revokedAt', async () => {
    const a = `tgw_turn_${randomBytes(16).toString('hex')}`;
    await race(1, { BOOTSTRAP_ADMIN_KEY: a });
    const [{ id: aId }] = (await ds.query('SELECT id FROM api_keys WHERE key_hash = $1', [hashApiKey(a)])) as { id: string }[];
    const me = { keyId: aId, orgId: null, role: 'admin' as const };
    // A's first write (an ops key) held at its ledger insert, holding A (holdActorKey).
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let armed = true;
    const hooked = withQueryHook(ds, async (sql) => {
      if (armed && sql.includes('INSERT INTO runtime_ledger_events')) {
        armed = false;
        entered();
        await gate;
      }
    });
    const heldKeys = new ApiKeysService(hooked, app.get(LedgerEventsService), app.get(OrgScopeService), config, app.get(Clock));
    const laterKeys = new ApiKeysService(ds, app.get(LedgerEventsService), app.get(OrgScopeService), config, app.get(Clock));
    try {
      const first = heldKeys.create(me, { orgId: null, role: 'ops', name: 'held by A' });
      await inside;
      // A new BOOTSTRAP_ADMIN_KEY retires A: it waits for A's write in flight.
      const b = `tgw_turn_${randomBytes(16).toString('hex')}`;
      const retire = race(1, { BOOTSTRAP_ADMIN_KEY: b });
      await waitFor(
        async () => (await waitsOnLock(ds, REVOKE_TURN_SQL)) || (await waitsOnLock(ds, '%UPDATE api_keys SET revoked_at%')),
        'the retirement waiting for A\'s write',
      );
      // A begins another write: it either answered (it passed the retirement) or waits for it; no timing decides.
      let secondAnswered = false;
      const second = laterKeys.create(me, { orgId: null, role: 'ops', name: 'begun after the retirement' }).then(
        (v) => ((secondAnswered = true), { ok: v }),
        (err: unknown) => ((secondAnswered = true), { err }),
      );
      await waitFor(async () => secondAnswered || (await waitsOnLock(ds, '%FROM api_keys, fair%')), 'the second write answered or waiting');
      release();
      const made = await first;
      recordApiKey(made.key, 'ops', 'ApiKeysService.create');
      const [retired] = await retire;
      expect(retired.status).toBe('fulfilled');
      const later = await second;
      if ('ok' in later) recordApiKey(later.ok.key, 'ops', 'ApiKeysService.create');
      const [{ revoked_at }] = (await ds.query('SELECT revoked_at FROM api_keys WHERE id = $1', [aId])) as { revoked_at: Date }[];
      expect('err' in later ? later.err : later.ok, `A revoked at ${revoked_at.toISOString()}`).toMatchObject({ code: 'UNAUTHENTICATED' });
      const madeByA = (await ds.query('SELECT created_at FROM api_keys WHERE created_by = $1', [aId])) as { created_at: Date }[];
      expect(madeByA).toHaveLength(1);
      for (const k of madeByA) expect(k.created_at.getTime()).toBeLessThanOrEqual(revoked_at.getTime());
    } finally {
      release();
      await Promise.all([heldKeys.beforeApplicationShutdown(), laterKeys.beforeApplicationShutdown()]);
    }
  });

  it('a configured key not of our tgw_ form is listed by a bit of its hash, never its own first characters (also a row stored before)', async () => {
    const own = `Zq8r7Lm2Xv${randomBytes(16).toString('hex')}`;
    await race(1, { BOOTSTRAP_ADMIN_KEY: own });
    expect((await liveState(own)).key_prefix).toMatch(/^cfg:[0-9a-f]{6}$/);
    await ds.query('UPDATE api_keys SET key_prefix = $2 WHERE key_hash = $1', [hashApiKey(own), own.slice(0, 10)]); // as stored before
    await race(1, { BOOTSTRAP_ADMIN_KEY: own });
    const { key_prefix } = await liveState(own);
    expect(key_prefix).toMatch(/^cfg:/);
    expect(own).not.toContain(key_prefix.slice(4));
  });

  it('the last platform admin key cannot be revoked (409 CONFLICT); with another one it can', async () => {
    const keys = app.get(ApiKeysService);
    const lone = `tgw_lone_${randomBytes(16).toString('hex')}`;
    await race(1, { BOOTSTRAP_ADMIN_KEY: lone });
    const [{ id }] = (await ds.query('SELECT id FROM api_keys WHERE key_hash = $1', [hashApiKey(lone)])) as { id: string }[];
    const others = (await ds.query(`UPDATE api_keys SET revoked_at = now() WHERE org_id IS NULL AND role = 'admin' AND revoked_at IS NULL AND id <> $1 RETURNING id`, [
      id,
    ])) as [{ id: string }[], number];
    try {
      const me = { keyId: id, orgId: null, role: 'admin' as const };
      await expect(keys.revoke(me, id)).rejects.toMatchObject({ code: 'CONFLICT' });
      expect((await liveState(lone)).live).toBe(true);
      const second = await keys.create(me, { orgId: null, role: 'admin', name: 'second admin' });
      recordApiKey(second.key, 'admin', 'ApiKeysService.create');
      // Two revokes at once of the last two: one passes, the other is refused.
      const results = await Promise.allSettled([keys.revoke(me, id), keys.revoke(me, second.id)]);
      expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
      const live = (await ds.query(`SELECT count(*)::int AS n FROM api_keys WHERE org_id IS NULL AND role = 'admin' AND revoked_at IS NULL`)) as { n: number }[];
      expect(live[0].n).toBe(1);
    } finally {
      await ds.query(`UPDATE api_keys SET revoked_at = NULL WHERE id = ANY($1::uuid[])`, [others[0].map((r) => r.id)]);
    }
  });
});

describe('BOOTSTRAP_ADMIN_KEY that could never authenticate', () => {
  const base = { NODE_ENV: 'production', MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY };
  const problemsFor = (key: string): string => {
    try {
      loadConfig({ ...base, BOOTSTRAP_ADMIN_KEY: key });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return (err as ConfigError).problems.join('\n');
    }
    return '';
  };

  it('is refused at start-up with a message that names the variable, not the key', () => {
    const spaced = 'tgw with spaces in it 0123456789abcdef';
    const long = 'tgw_' + 'x'.repeat(600);
    const unicode = 'tgw_ключ_0123456789abcdef0123456789';
    const tab = 'tgw_\t0123456789abcdef0123456789abcdef';
    for (const key of [spaced, long, unicode, tab]) {
      const problems = problemsFor(key);
      expect(problems, JSON.stringify(key)).toMatch(/BOOTSTRAP_ADMIN_KEY/);
      expect(problems).not.toContain(key);
      expect(problems).not.toContain(key.slice(0, 12));
    }
    expect(problemsFor(long)).toMatch(/at most 512/);
    expect(problemsFor(spaced)).toMatch(/printable ASCII/);
  });

  it('accepts the keys the auth guard accepts (32..512 printable ASCII)', () => {
    expect(loadConfig({ ...base, BOOTSTRAP_ADMIN_KEY: 'a'.repeat(32) }).BOOTSTRAP_ADMIN_KEY).toBe('a'.repeat(32));
    expect(loadConfig({ ...base, BOOTSTRAP_ADMIN_KEY: '!'.repeat(256) + '~'.repeat(256) }).BOOTSTRAP_ADMIN_KEY).toHaveLength(512);
  });

  it('main exits 1 before touching the database, without printing the key (built dist/)', async () => {
    const key = 'tgw spaced admin key 0123456789abcdef';
    const child = spawn(process.execPath, ['dist/src/main.js'], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...base, PORT: '0', HOST: '127.0.0.1', DATABASE_URL: process.env.DATABASE_URL!, BOOTSTRAP_ADMIN_KEY: key },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    teeChildToRunLog(child, 'gateway (dist/src/main.js)');
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = once(child, 'exit') as Promise<[number | null]>;
    // Without the check it starts and serves: stop it as soon as it says so rather than wait for a timeout.
    const listening = new Promise<void>((resolve) => child.stdout.on('data', () => /listening on/.test(out) && resolve()));
    await Promise.race([exited, listening]);
    if (child.exitCode === null) child.kill('SIGKILL');
    const [code] = await exited;
    expect(code).toBe(1);
    expect(out).toMatch(/BOOTSTRAP_ADMIN_KEY/);
    expect(out).not.toContain('spaced admin key');
    expect(out).not.toMatch(/listening on/);
  });
});
