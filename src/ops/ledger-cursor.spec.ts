import { describe, expect, it } from 'vitest';
import { filterHash, LedgerCursorCodec } from './ledger-cursor.js';

const keyring = (b: number) => ({ activeKeyId: 'k1', keys: new Map([['k1', Buffer.alloc(32, b)]]) });
const pos = { createdIso: '2026-01-02T03:04:05.123456Z', key: '0b8f7a52-9a6b-4c8e-9d1f-3f3e2a1b0c9d' };

describe('LedgerCursorCodec', () => {
  const codec = new LedgerCursorCodec({ keyring: keyring(1) });
  const f = filterHash({ status: 'failed', toolName: undefined });

  it('round-trips a position for the same listing, scope and filters', () => {
    const c = codec.encode('tool-calls', 'org-1', f, pos);
    expect(codec.decode(c, 'tool-calls', 'org-1', f)).toEqual(pos);
    expect(c).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  });

  it('ignores absent filters but not present ones', () => {
    expect(filterHash({ status: 'failed' })).toBe(f);
    expect(filterHash({ status: 'blocked' })).not.toBe(f);
    expect(filterHash({ status: 'failed', runId: 'x' })).not.toBe(f);
  });

  it('refuses another listing, scope, filter set, key, or any edited byte', () => {
    const c = codec.encode('tool-calls', 'org-1', f, pos);
    expect(() => codec.decode(c, 'ledger-events', 'org-1', f)).toThrow(/cursor/);
    expect(() => codec.decode(c, 'tool-calls', '*', f)).toThrow(/cursor/);
    expect(() => codec.decode(c, 'tool-calls', 'org-1', filterHash({}))).toThrow(/cursor/);
    expect(() => new LedgerCursorCodec({ keyring: keyring(2) }).decode(c, 'tool-calls', 'org-1', f)).toThrow(/cursor/);
    for (let i = 0; i < c.length; i++) {
      if (c[i] === '.') continue;
      const edited = c.slice(0, i) + (c[i] === 'A' ? 'B' : 'A') + c.slice(i + 1);
      expect(() => codec.decode(edited, 'tool-calls', 'org-1', f), `byte ${i}`).toThrow(/cursor/);
    }
    for (const junk of ['', '.', 'abc', 'abc.def', `${c}.x`]) expect(() => codec.decode(junk, 'tool-calls', 'org-1', f)).toThrow(/cursor/);
  });
});
