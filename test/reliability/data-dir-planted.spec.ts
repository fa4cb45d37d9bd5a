/**
 * DATA_DIR not there at start-up passes loadConfig's check (untrustedDataDir); with the embedded database and a master
 * key set, nothing made the folder until the embedded helper did, a process start later, taking a folder found there as
 * it was: another local user who made it first (under /tmp, once the helper showed up in /proc) had their pg.password
 * adopted and logged in as the cluster's superuser (found by a review of the check). The gateway now makes the folder
 * (0700; 0711 as root) and checks it again before it starts the helper: by the time the helper runs, DATA_DIR is the
 * gateway's own and another user can put nothing in it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { trackChild } from '../support/child-processes.js';
import { childrenOf } from '../support/embedded-processes.js';
import { gatewayEnv } from '../support/gateway-process.js';
import { teeChildToRunLog } from '../support/run-log.js';
import { sleep, waitFor } from './support.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = fileURLToPath(new URL('../../dist/src/main.js', import.meta.url));
const OTHER = 65534; // nobody: another local user
const base = mkdtempSync(join(tmpdir(), 'data-dir-planted-'));
process.once('exit', () => rmSync(base, { recursive: true, force: true }));
chmodSync(base, 0o1777); // a shared folder, as /tmp

describe.runIf(process.getuid?.() === 0)('a DATA_DIR another user would make once the embedded helper starts', () => {
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it('is already the gateway\'s own (0711, root\'s) when the helper runs: nothing can be planted in it', async () => {
    const dataDir = join(base, 'gw-data');
    const child = spawn(process.execPath, [MAIN], { cwd: ROOT, env: gatewayEnv({ DATABASE_URL: undefined, DATA_DIR: dataDir }), stdio: ['ignore', 'pipe', 'pipe'] });
    trackChild(child);
    teeChildToRunLog(child, 'gateway (DATA_DIR planted)');
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => (out += c));
    const exited = once(child, 'exit');
    try {
      const helperStarted = (): boolean => {
        try {
          return childrenOf(child.pid!).length > 0;
        } catch {
          return false; // ps finds none yet (exit 1)
        }
      };
      await waitFor(() => helperStarted() || child.exitCode !== null, 'the embedded helper to start', 60_000, 5);
      // What the other user would do: make the folder, or write a password into it.
      expect(() => mkdirSync(dataDir)).toThrow(/EEXIST/);
      const st = statSync(dataDir);
      expect({ uid: st.uid, mode: (st.mode & 0o777).toString(8) }).toEqual({ uid: 0, mode: '711' });
      const plant = spawnSync('sh', ['-c', `echo ${'ab'.repeat(24)} > "${join(dataDir, 'pg.password')}"`], { uid: OTHER, gid: OTHER });
      expect(plant.status).not.toBe(0);
      await waitFor(() => /listening on http/.test(out) || child.exitCode !== null, 'the gateway listening', 90_000);
      expect(/listening on http/.test(out)).toBe(true);
      expect(readFileSync(join(dataDir, 'pg.password'), 'utf8').trim()).not.toBe('ab'.repeat(24));
    } finally {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await Promise.race([exited, sleep(30_000)]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
    }
  }, 150_000);
});
