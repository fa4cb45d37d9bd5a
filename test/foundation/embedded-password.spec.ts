/**
 * The embedded PostgreSQL listens on 127.0.0.1 with password authentication. Its superuser's password was the
 * well-known "postgres": any local user or process could log in as superuser, read or rewrite the ledger and the
 * keys, and with COPY … FROM PROGRAM read the gateway's environment (its master key). It is now random, made once
 * per data folder and kept beside it (`<DATA_DIR>/pg.password`, mode 600); a cluster made before gets it at its
 * next start.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';

// In the checkout, as the gateway's DATA_DIR is (started as root, PostgreSQL runs as a user that must reach it).
const dataDir = resolve('.tmp', `embedded-password-${process.pid}-${Date.now()}`);
mkdirSync(dataDir, { recursive: true });
const pgDir = join(dataDir, 'pg');
const passwordFile = `${pgDir}.password`;
/** What the run-wide leak scan reads (TEST_MINTED_SECRETS): the test's own file, not the run's. */
const mintedFile = join(dataDir, 'minted-secrets.tsv');
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

async function start(): Promise<{ child: ChildProcess; url: string; port: number; stderr: () => string }> {
  const child = spawn(process.execPath, [resolve('scripts/pg-server.mjs')], {
    env: { ...process.env, PG_DATA_DIR: pgDir, PG_PERSISTENT: '1', PG_FAST: '1', PG_PARENT_STOPS: '1', TEST_MINTED_SECRETS: mintedFile },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const lines = createInterface({ input: child.stdout! });
  const outcome = await Promise.race([
    once(lines, 'line').then(([l]) => ({ line: l as string })),
    once(child, 'exit').then(([code]) => ({ exit: code as number })),
  ]);
  if (!('line' in outcome)) throw new Error(`pg-server exited ${outcome.exit}: ${err}`);
  const { url, port } = JSON.parse(outcome.line) as { url: string; port: number };
  return { child, url, port, stderr: () => err };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = once(child, 'exit');
  child.stdin!.end();
  await exited;
}

/** The error code of a superuser login with this password, or 'ok'. */
async function login(port: number, password: string): Promise<string> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password, database: 'postgres' });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  } finally {
    await client.end().catch(() => undefined);
  }
}

describe('the embedded PostgreSQL superuser password', () => {
  it('is random per data folder, kept mode 600 beside it, the one in the URL; "postgres" is refused; it survives restarts', async () => {
    const first = await start();
    let password: string;
    try {
      password = readFileSync(passwordFile, 'utf8').trim();
      expect(password).toMatch(/^[0-9a-f]{48}$/);
      expect(statSync(passwordFile).mode & 0o777).toBe(0o600);
      expect(new URL(first.url).password).toBe(password);
      expect(await login(first.port, 'postgres')).toBe('28P01'); // before: 'ok', superuser
      expect(await login(first.port, password)).toBe('ok');
      // In a test run the password joins the secrets the run-wide leak scan looks for (a DATABASE_URL logged whole).
      expect(readFileSync(mintedFile, 'utf8')).toBe(`embedded PostgreSQL password\t${password}\n`);
    } finally {
      await stop(first.child);
    }
    const again = await start();
    try {
      expect(new URL(again.url).password).toBe(password);
      expect(await login(again.port, password)).toBe('ok');
      expect(readFileSync(mintedFile, 'utf8').split('\n').filter(Boolean)).toEqual([1, 2].map(() => `embedded PostgreSQL password\t${password}`));
    } finally {
      await stop(again.child);
    }
  }, 120_000);

  it('initdb never gets the password through a file other local users can find (the library wrote /tmp/pg-password-<id>, mode 644)', async () => {
    const fresh = resolve('.tmp', `embedded-password-fresh-${process.pid}-${Date.now()}`);
    mkdirSync(fresh, { recursive: true });
    const inTmp: string[] = [];
    const folders: number[] = [];
    let watching = true;
    const watch = (async () => {
      while (watching) {
        for (const name of readdirSync(tmpdir())) if (name.startsWith('pg-password-') && !inTmp.includes(name)) inTmp.push(name);
        for (const name of readdirSync(fresh)) {
          if (!name.startsWith('pg.initdb-tmp.')) continue;
          try {
            folders.push(statSync(join(fresh, name)).mode & 0o777);
          } catch {
            // gone already
          }
        }
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    const child = spawn(process.execPath, [resolve('scripts/pg-server.mjs')], {
      env: { ...process.env, PG_DATA_DIR: join(fresh, 'pg'), PG_PERSISTENT: '0', PG_FAST: '1', PG_PARENT_STOPS: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    try {
      await once(createInterface({ input: child.stdout! }), 'line');
    } finally {
      watching = false;
      await watch;
      await stop(child);
      rmSync(fresh, { recursive: true, force: true });
    }
    expect(inTmp).toEqual([]);
    expect(folders.length).toBeGreaterThan(0); // seen while initdb ran: no one else may enter it (its path is on initdb's command line)
    // Started as root, the postgres system user (initdb) enters it as its group; otherwise no one but us.
    expect(new Set(folders)).toEqual(new Set([process.getuid?.() === 0 ? 0o710 : 0o700]));
  }, 120_000);

  it('a cluster made with the well-known password (before) gets the data folder’s own at its next start', async () => {
    const made = await start();
    try {
      const client = new pg.Client(made.url);
      await client.connect();
      await client.query(`ALTER ROLE postgres PASSWORD 'postgres'`);
      await client.end();
    } finally {
      await stop(made.child);
    }
    rmSync(passwordFile); // as a data folder made before pg.password was
    const upgraded = await start();
    try {
      const password = readFileSync(passwordFile, 'utf8').trim();
      expect(new URL(upgraded.url).password).toBe(password);
      expect(upgraded.stderr()).toContain('replaced the superuser\'s well-known password');
      expect(upgraded.stderr()).not.toContain(password);
      expect(await login(upgraded.port, 'postgres')).toBe('28P01');
      expect(await login(upgraded.port, password)).toBe('ok');
    } finally {
      await stop(upgraded.child);
    }
  }, 120_000);
});
