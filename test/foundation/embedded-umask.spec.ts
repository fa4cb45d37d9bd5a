/**
 * The data folder (DATA_DIR) the gateway creates (pg-server.mjs createParentFolder, app-config createOnce, main.ts
 * showGeneratedKey) has a mode of its own whatever the umask (makeDataDir): under umask 000 it was world-writable, and
 * under root's umask 077 the postgres user could not enter it (nor read initdb's password file): the first start failed.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve('.tmp', `install-umask-${process.pid}`);
afterAll(() => rmSync(root, { recursive: true, force: true }));

/**
 * scripts/pg-server.mjs (non-persistent, fast) under `umask`, its cluster in `<root>/u<umask>/data/pg` (the folder
 * above DATA_DIR made 0755, as a checkout's is; DATA_DIR left for pg-server to create); resolves once it prints its
 * URL line, or exits.
 */
async function pgServerUnder(umask: string): Promise<{ dataDir: string; started: boolean; err: string; stop: () => Promise<void> }> {
  const above = join(root, `u${umask}`);
  mkdirSync(above);
  chmodSync(above, 0o755);
  const dataDir = join(above, 'data');
  const child = spawn('/bin/sh', ['-c', `umask ${umask}; exec "$0" "$@"`, process.execPath, 'scripts/pg-server.mjs'], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LANG: 'C.UTF-8', PG_DATA_DIR: join(dataDir, 'pg'), PG_FAST: '1', PG_PERSISTENT: '0' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = once(child, 'exit');
  const first = await Promise.race([
    once(createInterface({ input: child.stdout! }), 'line').then(() => true),
    exited.then(() => false),
  ]);
  return {
    dataDir,
    started: first,
    err,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.stdin!.end();
      await exited;
    },
  };
}

describe('the umask the embedded PostgreSQL is started under', () => {
  mkdirSync(root, { recursive: true });
  chmodSync(root, 0o755);

  it.runIf(process.getuid?.() === 0)('started as root under umask 077, the embedded PostgreSQL starts in a DATA_DIR the gateway creates', async () => {
    const pg = await pgServerUnder('077');
    try {
      // Observed: "started as root, PostgreSQL runs as the postgres system user, which cannot enter …/data (mode 700) …
      // put the checkout and DATA_DIR where it can (under /srv or /opt, say)": a folder it made itself, moments before.
      expect(pg.started, pg.err).toBe(true);
    } finally {
      await pg.stop();
    }
  }, 60_000);

  it('under umask 000 the folder holding master.key, pg.password and bootstrap-admin.key is not world-writable', async () => {
    const pg = await pgServerUnder('000');
    try {
      expect(pg.started, pg.err).toBe(true);
      // Observed: drwxrwxrwx. Any local user may then plant a symbolic link at pg.password.<pid> or
      // bootstrap-admin.key (writeFileSync follows it: the secret is written into the attacker's file), or replace
      // master.key with a key of their own.
      expect((statSync(pg.dataDir).mode & 0o777).toString(8)).not.toMatch(/[2367]$/);
      expect(statSync(pg.dataDir).mode & 0o002).toBe(0);
    } finally {
      await pg.stop();
    }
  }, 60_000);
});
