/**
 * makeDataDir creates its folders 0700 (mkdir's mode; the umask only narrows it) and then sets their mode: created with the
 * umask's mode and chmod-ed after, under umask 000 they were world-writable for a moment, when another user could plant a
 * link where master.key or pg.password is written next.
 */
import * as fs from 'node:fs';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeDataDir } from './data-dir.js';

describe('makeDataDir under umask 000 (the moment of creation)', () => {
  it('never leaves a folder it creates group- or world-writable, not even between mkdir and chmod', () => {
    const base = mkdtempSync(join(tmpdir(), 'data-dir-moment-'));
    const dir = join(base, 'a', 'data');
    /** Each new folder's mode the moment mkdir returns, before makeDataDir's chmod. */
    const atCreation: Record<string, number> = {};
    const watching = {
      mkdirSync: ((p: string, o?: fs.MakeDirectoryOptions) => {
        const first = fs.mkdirSync(p, o);
        // Every folder this call made: `p` alone, or (recursive) those from the first one it made down to `p`.
        for (let d = resolve(p); ; d = dirname(d)) {
          atCreation[d] = statSync(d).mode & 0o777;
          if (typeof first !== 'string' || d === resolve(first) || dirname(d) === d) break;
        }
        return first;
      }) as typeof fs.mkdirSync,
      chmodSync: fs.chmodSync,
      existsSync: fs.existsSync,
    };
    const before = process.umask(0);
    try {
      makeDataDir(dir, watching);
    } finally {
      process.umask(before);
    }
    try {
      expect(Object.keys(atCreation).sort()).toEqual([join(base, 'a'), dir].sort());
      expect(Object.values(atCreation).filter((m) => (m & 0o022) !== 0)).toEqual([]);
      expect(statSync(dir).mode & 0o777).toBe(process.getuid?.() === 0 ? 0o711 : 0o700);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
});
