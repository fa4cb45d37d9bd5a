import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeDatabase } from '../../src/db/database-probe.js';
import { ledgerVerifyCommand } from '../../src/ops/ledger-verify.command.js';
import { runBuiltCli } from '../support/built-cli.js';
import { gatewayEnv } from '../support/gateway-process.js';
import { teeChildToRunLog } from '../support/run-log.js';
import { createScratchDatabase, runStatements, type ScratchDatabase } from '../support/scratch-database.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { KNOWN_STARTUP_PARAMETERS, startStartupFilterProxy, type StartupFilterProxy } from '../support/startup-filter-proxy.js';
import { TEST_MASTER_KEY } from '../support/secrets.js';
import { bearer } from '../support/test-app.js';

/**
 * DB_CONNECTION_MODE=pooled: the gateway behind a pooler that refuses the startup parameters it would send (AWS RDS
 * Proxy refuses `options`, Neon's pooler and an unconfigured PgBouncer refuse the timeouts too). Before the setting
 * there was no way to start behind one: every connection sent them. Now nothing but the user, database and
 * application name is sent, and start-up checks that the role or database sets what the code needs.
 */

const quick = { budgetMs: 600, intervalMs: 150, onWait: () => undefined, stopped: () => false, queryTimeoutMs: 20_000, connectionMode: 'pooled' as const };

describe('DB_CONNECTION_MODE=pooled behind a pooler that refuses the settings as startup parameters', () => {
  it('start-up names what the role lacks, with the ALTER ROLE statements; run as that role, they are all it takes', async () => {
    const db = await createScratchDatabase('tg_role_settings');
    const role = `tg_probe_role_${process.pid}`;
    await runStatements(db.url, [`CREATE ROLE ${role} LOGIN PASSWORD 'role-pw'`]);
    const asRole = new URL(db.url);
    asRole.username = role;
    asRole.password = 'role-pw';
    const front = await startStartupFilterProxy(asRole.toString(), 'refuse');
    try {
      const problem = await probeDatabase(front.url, quick);
      expect(problem).toMatch(/^the database sessions do not have the settings the gateway needs \(.*statement_timeout is 0 \(none\); idle_in_transaction_session_timeout is 0 \(none\)\), and with DB_CONNECTION_MODE=pooled it does not send them\. /);
      expect(front.seen).toEqual([KNOWN_STARTUP_PARAMETERS]); // nothing else was sent
      const fixes = problem!.match(/ALTER ROLE CURRENT_USER SET [^;]+;/g)!;
      expect(fixes).toEqual([
        "ALTER ROLE CURRENT_USER SET statement_timeout = '15000ms';",
        "ALTER ROLE CURRENT_USER SET idle_in_transaction_session_timeout = '20000ms';",
      ]);
      await runStatements(asRole.toString(), fixes); // the role itself, not a superuser
      expect(await probeDatabase(front.url, quick)).toBeNull();
      // A lower DB_QUERY_TIMEOUT_MS than the role's statement_timeout allows is named too.
      expect(await probeDatabase(front.url, { ...quick, queryTimeoutMs: 10_000 })).toMatch(/\(statement_timeout is 15000 ms; with DB_QUERY_TIMEOUT_MS 10000 ms it must be between 1000 and 9000 ms\).*SET statement_timeout = '9000ms';/);
      // Without the setting, the same pooler refuses the connection outright, and what to set is said.
      expect(await probeDatabase(front.url, { ...quick, connectionMode: 'direct' })).toMatch(
        /unsupported startup parameter: statement_timeout \(08P01\); behind a connection pooler, set DB_CONNECTION_MODE=pooled: see README/,
      );
      // With it, options of the user's own are still sent (the driver reads PGOPTIONS): refused, and said so.
      const own = new URL(front.url);
      own.searchParams.set('options', '-c lock_timeout=5s');
      expect(await probeDatabase(own.toString(), quick)).toMatch(
        /unsupported startup parameter: options \(08P01\); with DB_CONNECTION_MODE=pooled only your own startup options are sent .*: remove them/,
      );
      // The commands say what the gateway says.
      const show = await runBuiltCli('migrate', ['show'], { DATABASE_URL: front.url });
      expect([show.code, show.stderr]).toEqual([3, expect.stringMatching(/unsupported startup parameter: .*; behind a connection pooler, set DB_CONNECTION_MODE=pooled/)]);
    } finally {
      await front.close();
      await db.drop();
      await runStatements(process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL!, [`DROP ROLE IF EXISTS ${role}`]);
    }
  });

  it('the built gateway stops at once with that line when the database does not set them (DB_CONNECTION_MODE read from its environment)', async () => {
    const db = await createScratchDatabase('tg_role_settings_gw');
    const front = await startStartupFilterProxy(db.url, 'refuse');
    try {
      const child = spawn(process.execPath, ['dist/src/main.js'], { env: gatewayEnv({ DATABASE_URL: front.url, DB_CONNECTION_MODE: 'pooled', LOG_LEVEL: 'warn' }), stdio: ['ignore', 'pipe', 'pipe'] });
      teeChildToRunLog(child, 'dist/src/main.js, pooled, on a database without the settings');
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const [code] = (await once(child, 'close')) as [number]; // after its output is all read
      expect(code).toBe(1);
      expect(out.trim()).toMatch(
        /^fatal: the database sessions do not have the settings the gateway needs \(statement_timeout is 0 \(none\); idle_in_transaction_session_timeout is 0 \(none\)\), and with DB_CONNECTION_MODE=pooled it does not send them\. [^\n]*$/,
      );
      expect(front.seen.every((names) => names.every((n) => KNOWN_STARTUP_PARAMETERS.includes(n)))).toBe(true);
    } finally {
      await front.close();
      await db.drop();
    }
  }, 30_000);

  it('migrate check (a scratch database on the server, migrated down and up) runs through that pooler too', async () => {
    const front = await startStartupFilterProxy(process.env.DATABASE_URL!, 'refuse');
    try {
      const r = await runBuiltCli('migrate', ['check'], { DATABASE_URL: front.url, DB_CONNECTION_MODE: 'pooled' });
      expect([r.code, r.stderr]).toEqual([0, '']);
      expect(front.seen.every((names) => names.every((n) => KNOWN_STARTUP_PARAMETERS.includes(n)))).toBe(true);
    } finally {
      await front.close();
    }
  }, 120_000);

  it("credentials-rotate beside a gateway on its embedded database reaches it directly, settings sent, whatever DB_CONNECTION_MODE says", async () => {
    // A stand-in for a running embedded database: DATA_DIR/pg/postmaster.pid naming this process and a proxy's port.
    const front = await startStartupFilterProxy(process.env.DATABASE_URL!, 'drop');
    const dir = mkdtempSync(join(tmpdir(), 'tg-rotate-embedded-'));
    try {
      mkdirSync(join(dir, 'pg'));
      writeFileSync(join(dir, 'pg', 'postmaster.pid'), `${process.pid}\n${dir}/pg\n0\n${new URL(front.url).port}\n`);
      writeFileSync(join(dir, 'pg.password'), 'a'.repeat(48), { mode: 0o600 }); // as the helper writes it (untrustedDataDir)
      const r = await runBuiltCli('credentials-rotate', [], { DATABASE_URL: '', DATA_DIR: dir, DB_CONNECTION_MODE: 'pooled', MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY });
      expect(r.stderr).toContain('using the embedded database');
      expect(front.seen[0]).toEqual(expect.arrayContaining(['options', 'statement_timeout', 'idle_in_transaction_session_timeout']));
    } finally {
      await front.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  describe('on a database that sets them', () => {
    let db: ScratchDatabase;
    let front: StartupFilterProxy;
    let h: Harness;

    beforeAll(async () => {
      db = await createScratchDatabase('tg_server_settings');
      const name = new URL(db.url).pathname.slice(1);
      await runStatements(db.url, [`ALTER DATABASE ${name} SET statement_timeout = '12s'`, `ALTER DATABASE ${name} SET idle_in_transaction_session_timeout = '19s'`]);
      front = await startStartupFilterProxy(db.url, 'refuse');
      // With migrations pending, neither start-up nor migrate run migrates through the pooler (its transaction pool could
      // not hold the migration lock); each says to run them against the server itself.
      await expect(startHarness({ DATABASE_URL: front.url, DB_CONNECTION_MODE: 'pooled' })).rejects.toThrow(
        /^\d+ database migration\(s\) pending \(.+\), and DB_CONNECTION_MODE=pooled: they are not run through a connection pooler/,
      );
      const viaPooler = await runBuiltCli('migrate', ['run'], { DATABASE_URL: front.url, DB_CONNECTION_MODE: 'pooled' });
      expect([viaPooler.code, viaPooler.stderr]).toEqual([2, expect.stringContaining('DB_CONNECTION_MODE=direct npm run migration:run')]);
      const direct = await runBuiltCli('migrate', ['run'], { DATABASE_URL: db.url });
      expect([direct.code, direct.stdout.trim()]).toEqual([0, expect.stringMatching(/^applied \d+ migration\(s\):\n {2}- \w+\n(.*\n)*migrations are up to date$/)]);
      expect((await runBuiltCli('migrate', ['run'], { DATABASE_URL: db.url })).stdout.trim()).toBe('migrations are up to date'); // none to apply
      h = await startHarness({ DATABASE_URL: front.url, DB_CONNECTION_MODE: 'pooled' }); // nothing pending now
    }, 90_000);
    afterAll(async () => {
      await h?.close();
      await front?.close();
      await db?.drop();
    });

    it('records and executes calls, and verifies, with the sessions on the database\'s own settings', async () => {
      const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
      const call = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
      expect([call.status, call.body.status]).toEqual([200, 'succeeded']);
      const [s] = (await h.t.ds.query(
        `SELECT current_setting('statement_timeout') AS st, current_setting('idle_in_transaction_session_timeout') AS it, current_setting('application_name') AS app`,
      )) as [{ st: string; it: string; app: string }];
      expect(s).toEqual({ st: '12s', it: '19s', app: 'tool-gateway' });
      expect(front.seen.length).toBeGreaterThan(1);
      expect(front.seen.filter((names) => names.some((n) => !KNOWN_STARTUP_PARAMETERS.includes(n)))).toEqual([]);
      // No statement prepared by name (a transaction-mode pool would run the next one on another server connection).
      expect([...front.namedStatements]).toEqual([]);
      const out: string[] = [];
      const io = { out: (l: string) => out.push(l), err: (l: string) => out.push(l) };
      expect(await ledgerVerifyCommand(['--org', org.orgId], { DATABASE_URL: front.url, DB_CONNECTION_MODE: 'pooled' }, io), out.join('\n')).toBe(0);
      expect(await ledgerVerifyCommand(['--org', org.orgId], { DATABASE_URL: front.url, DB_CONNECTION_MODE: 'pooler' }, io)).toBe(2);
      expect(out.join('\n')).toContain('DB_CONNECTION_MODE must be one of direct, pooled, got "pooler"');
    });

    it('direct (the default), the same calls prepare their statements by name: what the proxy counts is there to be seen', async () => {
      const dropping = await startStartupFilterProxy(db.url, 'drop');
      const direct = await startHarness({ DATABASE_URL: dropping.url });
      try {
        const org = await setupOrg(direct.t, { tools: ['order_lookup.lookup'] });
        const call = await direct.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
        expect(call.body.status).toBe('succeeded');
        expect(dropping.namedStatements.size).toBeGreaterThanOrEqual(2); // the intent and the outcome statements
      } finally {
        await direct.close();
        await dropping.close();
      }
    });
  });
});
