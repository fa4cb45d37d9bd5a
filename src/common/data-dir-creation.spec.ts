/**
 * makeDataDir creates its folders 0700 (mkdir's mode; the umask only narrows it) and then sets their mode: created with the
 * umask's mode and chmod-ed after, under umask 000 they were world-writable for a moment, when another user could plant a
 * link where master.key or pg.password is written next.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';

/** The modes the new folders have the moment mkdir returns (before makeDataDir's chmod): what another user can race. */
const atCreation: Record<string, number> = {};
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  return {
    ...fs,
    mkdirSync: (p: string, o?: unknown) => {
      const first = fs.mkdirSync(p, o as never);
      if (typeof first === 'string') {
        for (let d = p; ; d = join(d, '..')) {
          atCreation[d] = fs.statSync(d).mode & 0o777;
          if (d === first || d.length <= first.length) break;
        }
      }
      return first;
    },
  };
});

describe('makeDataDir under umask 000 (the moment of creation)', () => {
  it('never leaves DATA_DIR world-writable, not even between mkdir and chmod (mkdir with mode 0700)', async () => {
    const { makeDataDir } = await import('./data-dir.js');
    const base = mkdtempSync(join(tmpdir(), 'scratch-diff-'));
    const dir = join(base, 'a', 'data');
    const before = process.umask(0);
    try {
      makeDataDir(dir);
    } finally {
      process.umask(before);
    }
    try {
      expect(statSync(dir).mode & 0o777).toBe(process.getuid?.() === 0 ? 0o711 : 0o700); // after: fine
      // at creation: a world-writable folder, for as long as the chmod takes, where master.key / pg.password go
      expect(Object.values(atCreation).map((m) => (m & 0o022) === 0)).toEqual(Object.values(atCreation).map(() => true));
      expect(Object.keys(atCreation).length).toBeGreaterThan(0);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
});
