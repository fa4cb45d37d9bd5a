import 'reflect-metadata';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Controller, type OnApplicationBootstrap } from '@nestjs/common';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/auth/api-key-hash.js';
import { createGateway } from '../../src/bootstrap.js';
import { loadConfig } from '../../src/config/app-config.js';
import { createFullEmulator } from '../../src/emulator/index.js';
import type { ShopifyEmulator } from '../../src/emulator/shopify.emulator.js';
import { ToolCallsService } from '../../src/tool-calls/tool-calls.service.js';
import { refundUse } from '../approvals/support.js';
import { recordApiKey } from '../support/api-keys.js';
import { appendToRunLog, teeChildToRunLog } from '../support/run-log.js';
import { dropScratchDatabase } from '../support/scratch-database.js';
import { emulatorEnv, setupOrg } from '../support/scenario.js';
import { TEST_ADMIN_KEY, TEST_MASTER_KEY } from '../support/secrets.js';
import { bearer, createKey, startTestApp } from '../support/test-app.js';

/** A database of its own on the test server (a generated admin key needs one without any), dropped by `drop`. */
async function scratchDatabase(label: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const server = new URL(process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL!);
  const dbName = `tg_${label}_${process.pid}_${Date.now()}`;
  const admin = new pg.Client({ connectionString: server.toString() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const db = new URL(server.toString());
  db.pathname = `/${dbName}`;
  return {
    url: db.toString(),
    drop: async () => {
      try {
        await dropScratchDatabase(admin, dbName); // leak-scanned first: the run-wide scan never sees it
      } finally {
        await admin.end();
      }
    },
  };
}

/** The built CLI (npm test builds first); resolves with its exit code and output, whatever the code. */
async function migrateCli(cmd: string, databaseUrl: string): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['dist/src/cli/migrate.js', cmd], { env: { PATH: process.env.PATH, DATABASE_URL: databaseUrl } });
    appendToRunLog(`child CLI migrate.js ${cmd}`, stdout + stderr);
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    appendToRunLog(`child CLI migrate.js ${cmd}`, (e.stdout ?? '') + (e.stderr ?? ''));
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/**
 * A second gateway started on a port that is taken (a restart while the old process still holds it, two replicas
 * on one host), or on a HOST that does not resolve, runs the whole start-up first — the approvals sweep included,
 * which claims approved calls and sends them to the vendor — and only then fails to listen. It exited at once:
 * the call at the vendor was cut off, left `running` for the orphan sweep to call indeterminate.
 */
describe('listen failure after start-up (dist/src/main.js)', () => {
  const emu = createFullEmulator();
  let started = false;
  afterAll(async () => {
    await emu.stop();
  });

  it.each([
    ['a taken port (EADDRINUSE)', 'port'],
    ['a HOST that does not resolve (ENOTFOUND; the config accepts any HOST)', 'host'],
  ])('%s: exit 1 only once the approved call the start-up sweep sent to the vendor is recorded', async (_what, mode) => {
    if (!started) await emu.start();
    started = true;
    const AMOUNT = mode === 'port' ? '7.17' : '7.18';
    const CENTS = mode === 'port' ? 717 : 718;
    const env = { ...emulatorEnv(emu.url), VENDOR_TIMEOUT_MS: '8000', APPROVAL_TTL_SECONDS: '3600' };
    // An approved refund nobody has run yet: the next gateway's start-up sweep claims it.
    const first = await startTestApp(env);
    const org = await setupOrg(first, { tools: ['shopify_refund.create'] });
    const expert = await createKey(first, org.orgId, 'expert');
    const res = await first.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse(AMOUNT));
    expect(res.status).toBe(202);
    const callId = res.body.toolCallId as string;
    const list = await first.http.get('/v1/approvals?status=pending').set(bearer(expert.key));
    const approval = (list.body.items as { id: string; toolCallId: string; actionDigest: string }[]).find((a) => a.toolCallId === callId)!;
    // Every lease of the org × vendor held: the decision is recorded, but this process does not run the call.
    const calls = first.app.get(ToolCallsService);
    const held: (() => void)[] = [];
    for (let r = calls.leaseFor(org.orgId, 'shopify'); r; r = calls.leaseFor(org.orgId, 'shopify')) held.push(r);
    const decided = await first.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);
    await first.close();
    held.forEach((r) => r());

    // The refund is applied at Shopify at once; its answer takes 2 s.
    emu.fault({ vendor: 'shopify', kind: 'delay_after', delayMs: 2_000, bodyMatch: /refundCreate/ });
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const child = spawn(process.execPath, ['dist/src/main.js'], {
        env: {
          PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', NODE_ENV: 'production',
          HOST: mode === 'port' ? '127.0.0.1' : 'gateway-host.invalid', PORT: mode === 'port' ? String(port) : '0',
          DATABASE_URL: process.env.DATABASE_URL!, MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY, BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY, LOG_LEVEL: 'warn', ...env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      teeChildToRunLog(child, 'gateway (dist/src/main.js)');
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const [code] = (await once(child, 'exit')) as [number | null];
      expect(code).toBe(1);
      expect(out).toMatch(mode === 'port' ? /EADDRINUSE/ : /ENOTFOUND|EAI_AGAIN/);

      // Read at once: whatever the exit left behind is what there is.
      const refunds = emu.vendor<ShopifyEmulator>('shopify').order('12345')!.refunds.filter((r) => r.amountCents === CENTS).length;
      const db = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await db.connect();
      const [{ status }] = (await db.query('SELECT status FROM tool_calls WHERE id = $1', [callId])).rows as { status: string }[];
      await db.end();
      // Still approved (never claimed: a later sweep runs it) or settled with the vendor's answer; never `running`.
      if (status === 'approved') expect(refunds).toBe(0);
      else expect({ status, refunds }).toEqual({ status: 'succeeded', refunds: 1 });
      expect(out).toMatch(mode === 'port' ? /fatal: cannot listen on 127\.0\.0\.1:\d+: .*EADDRINUSE/ : /fatal: cannot listen on gateway-host\.invalid:0: .*(ENOTFOUND|EAI_AGAIN)/);
    } finally {
      blocker.close();
    }
  }, 60_000);
});

describe('the generated platform admin key (development, no BOOTSTRAP_ADMIN_KEY)', () => {
  it('a SIGTERM during start-up after the key was committed: exit 0, and the key was printed and saved', async () => {
    const db = await scratchDatabase('genkey_stop');
    const dataDir = join('.tmp', `genkey-stop-${process.pid}-${Date.now()}`);
    const holder = new pg.Client({ connectionString: db.url });
    try {
      expect((await migrateCli('run', db.url)).code).toBe(0);
      await holder.connect();
      // Holds the start-up sweeps (they read tool_calls) once ensureBootstrapKey has committed.
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE tool_calls IN ACCESS EXCLUSIVE MODE');
      const child = spawn(process.execPath, ['dist/src/main.js'], {
        env: {
          PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', NODE_ENV: 'development', PORT: '0', HOST: '127.0.0.1',
          DATABASE_URL: db.url, MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY, DATA_DIR: dataDir, LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      teeChildToRunLog(child, 'gateway (dist/src/main.js)');
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const exited = once(child, 'exit') as Promise<[number | null]>;
      const probe = new pg.Client({ connectionString: db.url });
      await probe.connect();
      let keys = 0;
      for (let i = 0; i < 400 && keys === 0; i++) {
        keys = (await probe.query(`SELECT 1 FROM api_keys WHERE name = 'bootstrap admin (generated)'`)).rowCount ?? 0;
        if (keys === 0) await new Promise((r) => setTimeout(r, 25));
      }
      await probe.end();
      expect(keys).toBe(1); // committed
      await new Promise((r) => setTimeout(r, 200)); // start-up is in app.init() now, held by the lock
      child.kill('SIGTERM'); // Ctrl-C on the first start
      await new Promise((r) => setTimeout(r, 200));
      await holder.query('ROLLBACK');
      const [code] = await exited;
      expect(code).toBe(0);
      expect(out).not.toMatch(/listening on/);
      const printed = /generated a platform admin key \(shown once, also saved to [^)]*\):\n\n {2}(\S+)\n/.exec(out)?.[1];
      expect(printed, out).toBeDefined();
      const file = join(dataDir, 'bootstrap-admin.key');
      expect(existsSync(file)).toBe(true);
      expect(readFileSync(file, 'utf8').trim()).toBe(printed);
    } finally {
      await holder.end().catch(() => undefined);
      await db.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 90_000);

  it('createGateway hands the key over (onGeneratedAdminKey) before app.init(), so a failing init() does not lose it', async () => {
    @Controller()
    class FailingStartController implements OnApplicationBootstrap {
      onApplicationBootstrap(): void {
        throw new Error('start-up hook failed (test)');
      }
    }
    const db = await scratchDatabase('genkey_init');
    try {
      const config = loadConfig({ NODE_ENV: 'test', DATABASE_URL: db.url, MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY, LOG_LEVEL: 'warn', DATA_DIR: '.tmp/data-genkey-init' });
      let handed: string | undefined;
      await expect(createGateway(config, { extraControllers: [FailingStartController] }, { onGeneratedAdminKey: (key) => (handed = key) })).rejects.toThrow(
        'start-up hook failed (test)',
      );
      expect(handed).toMatch(/^tgw_/);
      recordApiKey(handed!, 'admin', 'generated bootstrap key');
      const check = new pg.Client({ connectionString: db.url });
      await check.connect();
      const found = await check.query(`SELECT 1 FROM api_keys WHERE name = 'bootstrap admin (generated)' AND key_hash = $1 AND revoked_at IS NULL`, [hashApiKey(handed!)]);
      await check.end();
      expect(found.rowCount).toBe(1); // the key it handed over is the one in the database
    } finally {
      await db.drop();
    }
  }, 60_000);
});

describe('migration:show (dist/src/cli/migrate.js show)', () => {
  it('exits 1 listing what is pending, without creating the migrations table; 0 once up to date', async () => {
    const db = await scratchDatabase('migshow');
    const tableExists = async (): Promise<boolean> => {
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        return ((await c.query(`SELECT to_regclass('typeorm_migrations') IS NOT NULL AS present`)).rows as { present: boolean }[])[0].present;
      } finally {
        await c.end();
      }
    };
    try {
      const fresh = await migrateCli('show', db.url);
      expect(fresh.code, fresh.stderr).toBe(1);
      expect(fresh.stdout).toMatch(/^\d+ pending migration\(s\):\n {2}- \S+/);
      expect(await tableExists()).toBe(false); // looking changed nothing

      expect((await migrateCli('run', db.url)).code).toBe(0);
      const upToDate = await migrateCli('show', db.url);
      expect(upToDate).toMatchObject({ code: 0, stdout: 'no pending migrations\n' });
      // Read as the gateway reads it: without the spaces or newline around it (a secret mounted from a file).
      const spaced = await migrateCli('show', ` ${db.url}\n`);
      expect(spaced, spaced.stderr).toMatchObject({ code: 0, stdout: 'no pending migrations\n' });

      // One migration forgotten (a rollback, a new release): pending again, by name.
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      const [{ name }] = (await c.query('DELETE FROM typeorm_migrations WHERE id = (SELECT max(id) FROM typeorm_migrations) RETURNING name')).rows as { name: string }[];
      await c.end();
      const behind = await migrateCli('show', db.url);
      expect(behind).toMatchObject({ code: 1, stdout: `1 pending migration(s):\n  - ${name}\n` });
    } finally {
      await db.drop();
    }
  }, 120_000);

  it('a malformed DATABASE_URL exits 2 naming the variable (not the password); an unreachable database exits 3, never "pending" (1)', async () => {
    for (const cmd of ['show', 'run', 'check']) {
      const bad = await migrateCli(cmd, 'postgres://u:p#S3cretPW@127.0.0.1/db');
      expect(bad.code, `${cmd}: ${bad.stderr}`).toBe(2);
      expect(bad.stderr).toMatch(/^DATABASE_URL must be a valid URL/);
      expect(bad.stdout + bad.stderr).not.toContain('S3cretPW');
    }
    // Only spaces is unset, as for the gateway: run and show need a server named.
    for (const cmd of ['show', 'run']) {
      const blank = await migrateCli(cmd, '   ');
      expect(blank.code, `${cmd}: ${blank.stderr}`).toBe(2);
      expect(blank.stderr).toMatch(/^DATABASE_URL is required/);
    }
    const unreachable = await migrateCli('show', 'postgres://u@127.0.0.1:1/db');
    expect(unreachable.code, unreachable.stderr).toBe(3);
    expect(unreachable.stderr).toMatch(/^migrate failed: /);
  }, 60_000);
});
