import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeDataDir } from './data-dir.js';

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
