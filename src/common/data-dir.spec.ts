import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../config/app-config.js';
import type { ConfigError } from '../config/config.schema.js';
import { makeDataDir, untrustedDataDir } from './data-dir.js';

describe('makeDataDir', () => {
  const made: string[] = [];
  afterEach(() => {
    for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const own = process.getuid?.() === 0 ? 0o711 : 0o700;
  const modeOf = (p: string): number => statSync(p).mode & 0o777;

  it.each(['000', '022', '077'])('under umask %s, every folder it creates has its own mode (0700; 0711 as root), one that exists is left alone', (umask) => {
    const base = mkdtempSync(join(tmpdir(), 'data-dir-'));
    made.push(base);
    chmodSync(base, 0o755);
    mkdirSync(join(base, 'there'));
    chmodSync(join(base, 'there'), 0o750);
    const before = process.umask(parseInt(umask, 8));
    try {
      makeDataDir(join(base, 'there', 'a', 'b', 'data'));
      makeDataDir(join(base, 'there', 'a', 'b', 'data')); // again: nothing created, nothing changed
    } finally {
      process.umask(before);
    }
    expect([modeOf(join(base, 'there', 'a')), modeOf(join(base, 'there', 'a', 'b')), modeOf(join(base, 'there', 'a', 'b', 'data'))]).toEqual([own, own, own]);
    expect(modeOf(join(base, 'there'))).toBe(0o750);
    expect(modeOf(base)).toBe(0o755);
  });
});

describe('untrustedDataDir', () => {
  const made: string[] = [];
  afterEach(() => {
    for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const fresh = (): string => {
    const dir = mkdtempSync(join(tmpdir(), 'data-trust-'));
    made.push(dir);
    return dir;
  };
  const asRoot = process.getuid?.() === 0;

  it('trusts a folder that is not there yet, and one of its own with its own 0600 files', () => {
    const dir = fresh();
    expect(untrustedDataDir(join(dir, 'not-yet'))).toBeUndefined();
    chmodSync(dir, 0o755); // readable by others: the files in it are what must not be
    writeFileSync(join(dir, 'master.key'), 'k\n', { mode: 0o600 });
    writeFileSync(join(dir, 'pg.password'), 'p\n', { mode: 0o600 });
    writeFileSync(join(dir, 'notes.txt'), 'x\n', { mode: 0o644 }); // not a secret the gateway adopts
    expect(untrustedDataDir(dir)).toBeUndefined();
  });

  it.each([0o777, 0o1777, 0o775, 0o722])('refuses a folder others can write (mode %o), naming it and the fix', (mode) => {
    const dir = fresh();
    chmodSync(dir, mode);
    const why = untrustedDataDir(dir);
    expect(why).toContain(dir);
    expect(why).toContain(`chmod go-w ${dir}`);
  });

  it.each(['master.key', 'pg.password'])('refuses a %s others can read or write', (name) => {
    const dir = fresh();
    for (const mode of [0o644, 0o660, 0o606]) {
      writeFileSync(join(dir, name), 'planted\n');
      chmodSync(join(dir, name), mode);
      expect(untrustedDataDir(dir)).toBe(`${join(dir, name)} can be read or written by others (mode ${mode.toString(8)}): chmod 600 ${join(dir, name)}`);
      rmSync(join(dir, name));
    }
  });

  it.runIf(asRoot)('refuses a folder, or a secret in it, that belongs to another user (one who made DATA_DIR first under /tmp)', () => {
    const dir = fresh();
    chownSync(dir, 65534, 65534);
    expect(untrustedDataDir(dir)).toMatch(/belongs to user 65534, not to this one \(0\) or root/);
    chownSync(dir, 0, 0);
    writeFileSync(join(dir, 'master.key'), 'planted\n', { mode: 0o600 });
    chownSync(join(dir, 'master.key'), 65534, 65534);
    expect(untrustedDataDir(dir)).toMatch(/master\.key belongs to user 65534/);
  });

  it('loadConfig refuses such a DATA_DIR before adopting its development key or its cluster password, and not when it uses neither', () => {
    const dir = fresh();
    chmodSync(dir, 0o777);
    writeFileSync(join(dir, 'master.key'), `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    const problems = (env: Record<string, string>): string[] => {
      try {
        loadConfig({ NODE_ENV: 'development', DATA_DIR: dir, ...env });
        return [];
      } catch (err) {
        return (err as ConfigError).problems;
      }
    };
    expect(problems({})).toEqual([expect.stringMatching(/^DATA_DIR: .* can be written by others \(mode 777\)/)]);
    // The master key set, but the embedded cluster (its pg.password) kept there: refused too.
    expect(problems({ MASTER_ENCRYPTION_KEY: randomBytes(32).toString('base64') })).toHaveLength(1);
    // A DATABASE_URL and a master key of the user's own: nothing is adopted from DATA_DIR.
    expect(problems({ MASTER_ENCRYPTION_KEY: randomBytes(32).toString('base64'), DATABASE_URL: 'postgres://u@127.0.0.1:5432/db' })).toEqual([]);
  });
});
