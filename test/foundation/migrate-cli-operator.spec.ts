/**
 * The migrate CLI (built dist/) as an operator runs it: `revert <last> --dry-run` (or a second name) reverted the last
 * migration and exited 0; `check` stopped by Ctrl-C or SIGTERM left its scratch database on the server,
 * and one whose connection the server ended crashed with an unhandled 'error' event and Node's stack trace, leaving it.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../migrations/index.js';
import { projectRoot } from '../../src/common/project-root.js';
import { runBuiltCli } from '../support/built-cli.js';
import { dropScratchDatabase, scratchDatabaseUrl } from '../support/scratch-database.js';
/** `npm run migration:revert -- <name> <anything else>`: an extra argument (a flag, a second name) is a usage error. */
describe('migrate CLI (built dist/): revert with an extra argument', () => {
  const dbName = `cli_rev_args_${process.pid}`;
  const url = scratchDatabaseUrl(dbName);
  let admin: pg.Client;
  const migrate = (args: string[]) => runBuiltCli('migrate', args, { DATABASE_URL: url });

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    const run = await migrate(['run']);
    expect(run.code, run.stderr).toBe(0);
  }, 60_000);
  afterAll(async () => {
    await dropScratchDatabase(admin, dbName);
    await admin.end();
  });

  it.each([['--dry-run'], ['--help'], [MIGRATIONS.at(-2)!.name]])('revert <last> %s: usage, exit 2, nothing reverted', async (extra) => {
    const last = MIGRATIONS.at(-1)!.name; // the last migration of this release
    const revert = await migrate(['revert', last, extra]);
    expect(revert.stderr).toMatch(/^usage: migrate/m);
    expect(revert.code).toBe(2);
    expect(revert.stdout).not.toContain('reverted');
    const show = await migrate(['show']);
    expect(show.stdout).toContain('no pending migrations');
    expect(show.code).toBe(0);
  }, 60_000);
});

/**
 * `npm run migration:check` against a server (DATABASE_URL set) creates a scratch database tg_drift_<pid> and drops it
 * in a `finally`. Ctrl-C (SIGINT) or a CI runner's SIGTERM while it runs must not leave that database on the server.
 */
describe('migrate check (built dist/): interrupted', () => {
  const left: string[] = [];
  const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
  afterAll(async () => {
    for (const pattern of left) {
      const { rows } = await admin.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [pattern]);
      for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => undefined);
    }
    await admin.end();
  });

  it.each(['SIGINT', 'SIGTERM'] as const)('%s while it runs leaves no tg_drift_<pid>_<random> database behind', async (signal) => {
    if (left.length === 0) await admin.connect();
    const child = spawn(process.execPath, [join(projectRoot(), 'dist/src/cli/migrate.js'), 'check'], {
      cwd: projectRoot(),
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', DATABASE_URL: process.env.DATABASE_URL ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    const db = `tg_drift_${child.pid}_%`;
    left.push(db);
    const exists = async () => ((await admin.query(`SELECT 1 FROM pg_database WHERE datname LIKE $1`, [db])).rowCount ?? 0) > 0;
    const deadline = Date.now() + 30_000;
    while (!(await exists())) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error('the scratch database never appeared');
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill(signal);
    const [code, sig] = await exited;
    expect(code !== 0 || sig !== null).toBe(true); // stopped, not "no drift"
    await new Promise((r) => setTimeout(r, 500));
    expect(await exists(), `${db} is still on the server after ${signal}`).toBe(false);
  }, 60_000);
});

/**
 * The same command when the server ends its connection to the database it was given (a DBA's pg_terminate_backend,
 * a server restart) while the check runs: a one-line "migrate failed: …" and exit 1, like every other failure —
 * not an unhandled 'error' event of its admin pg.Client with Node's stack trace — and no scratch database left.
 */
describe('migrate check (built dist/): its connection to the given database is ended', () => {
  const base = `cli_check_base_${process.pid}`;
  const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
  let drift: string | undefined;
  afterAll(async () => {
    if (drift) {
      const { rows } = await admin.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [drift]);
      for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => undefined);
    }
    await admin.query(`DROP DATABASE IF EXISTS ${base} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  });

  it('fails in one line, exit 1, no stack trace, no tg_drift_<pid>_<random> left', async () => {
    await admin.connect();
    await admin.query(`CREATE DATABASE ${base}`);
    const url = new URL(process.env.DATABASE_URL!);
    url.pathname = `/${base}`;
    const child = spawn(process.execPath, [join(projectRoot(), 'dist/src/cli/migrate.js'), 'check'], {
      cwd: projectRoot(),
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', DATABASE_URL: url.toString() },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
    const exited = once(child, 'exit') as Promise<[number | null]>;
    drift = `tg_drift_${child.pid}_%`;
    const exists = async () => ((await admin.query('SELECT 1 FROM pg_database WHERE datname LIKE $1', [drift])).rowCount ?? 0) > 0;
    const deadline = Date.now() + 30_000;
    while (!(await exists())) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error('the scratch database never appeared');
      await new Promise((r) => setTimeout(r, 50));
    }
    // Only the connections to this spec's own database (the check's admin client): nobody else's.
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [base]);
    const [code] = await exited;
    expect(stderr).not.toMatch(/Unhandled 'error' event|^\s+at /m);
    expect(stderr.trim().split('\n'), stderr).toHaveLength(1);
    expect(code).toBe(1);
    await new Promise((r) => setTimeout(r, 500));
    expect(await exists(), `${drift} is still on the server`).toBe(false);
  }, 60_000);
});

/**
 * `check` named its scratch database tg_drift_<pid> alone, and its clean-up dropped that name even when its CREATE had
 * failed because the name was taken: two checks in containers sharing one PostgreSQL server (each its own small pid),
 * or a re-run after a SIGKILLed check, met on one name — the second failed and force-dropped the first one's database
 * under it. The name now has 32 random bits, and only a database this run created is dropped.
 */
describe('migrate check (built dist/): another run holds the database its pid alone would name', () => {
  it("passes, and leaves that run's database and its connection alone", async () => {
    const cli = join(projectRoot(), 'dist/src/cli/migrate.js');
    // `read` first, so the pid node will run under is known before it starts.
    const child = spawn('sh', ['-c', `read x; exec "${process.execPath}" "${cli}" check`], {
      cwd: projectRoot(),
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', DATABASE_URL: process.env.DATABASE_URL ?? '' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stdout += d.toString()));
    const exited = once(child, 'exit') as Promise<[number | null]>;
    const otherDb = `tg_drift_${child.pid}`;
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${otherDb}`);
    const other = new pg.Client({ connectionString: scratchDatabaseUrl(otherDb) });
    let otherLost: Error | undefined;
    other.on('error', (e) => (otherLost = e));
    await other.connect();
    try {
      await other.query('CREATE TABLE work_in_progress (n int)');
      child.stdin.end('go\n');
      const [code] = await exited;
      expect(code, stdout).toBe(0);
      expect(stdout).toContain('no drift');
      expect((await other.query('SELECT count(*)::int AS n FROM work_in_progress')).rows).toEqual([{ n: 0 }]);
      expect(otherLost).toBeUndefined();
      const { rows } = await admin.query('SELECT datname FROM pg_database WHERE datname LIKE $1', [`tg_drift_${child.pid}_%`]);
      expect(rows, 'its own scratch database, dropped').toEqual([]);
    } finally {
      await other.end().catch(() => undefined);
      await admin.query(`DROP DATABASE IF EXISTS ${otherDb} WITH (FORCE)`);
      await admin.end();
    }
  }, 120_000);
});
