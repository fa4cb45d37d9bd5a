import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { cursorKey, filterHash, LedgerCursorCodec } from './ledger-cursor.js';

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

  describe('across a master-key switch', () => {
    const k1 = Buffer.alloc(32, 1);
    const k2 = Buffer.alloc(32, 2);
    const ring = (activeKeyId: string, ...ids: string[]) => ({ activeKeyId, keys: new Map(ids.map((id) => [id, id === 'k1' ? k1 : k2])) });
    const k1Active = new LedgerCursorCodec({ keyring: ring('k1', 'k2', 'k1') });
    const k2Active = new LedgerCursorCodec({ keyring: ring('k2', 'k2', 'k1') });
    const onlyK2 = new LedgerCursorCodec({ keyring: ring('k2', 'k2') });
    const payloadOf = (c: string) => JSON.parse(Buffer.from(c.split('.')[0], 'base64url').toString()) as Record<string, unknown>;
    const signer = (c: string) => payloadOf(c).s;
    const withPayload = (c: string, payload: object) => `${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${c.split('.')[1]}`;

    it('signs under the active key and takes a cursor signed under any loaded key, both ways', () => {
      const fromK1 = k1Active.encode('approvals', 'org-1', f, pos);
      const fromK2 = k2Active.encode('approvals', 'org-1', f, pos);
      expect(signer(fromK1)).toBe('k1');
      expect(signer(fromK2)).toBe('k2');
      expect(k2Active.decode(fromK1, 'approvals', 'org-1', f)).toEqual(pos);
      expect(k1Active.decode(fromK2, 'approvals', 'org-1', f)).toEqual(pos);
      expect(onlyK2.decode(fromK2, 'approvals', 'org-1', f)).toEqual(pos);
    });

    it('refuses a key no longer loaded, an unknown key id, and a key id swapped for another loaded one', () => {
      const fromK1 = k1Active.encode('api-keys', 'org-1', f, pos);
      expect(() => onlyK2.decode(fromK1, 'api-keys', 'org-1', f)).toThrow(/cursor/);
      // the key id is signed too: naming another loaded key, an unknown one or none at all is refused
      for (const s of ['k3', 'K1', '__proto__', 'k2', undefined, 1]) {
        expect(() => k2Active.decode(withPayload(fromK1, { ...payloadOf(fromK1), s }), 'api-keys', 'org-1', f), String(s)).toThrow(/cursor/);
      }
      expect(() => k2Active.decode(withPayload(fromK1, { ...payloadOf(fromK1), v: 1, s: undefined }), 'api-keys', 'org-1', f)).toThrow(/cursor/);
      expect(k2Active.decode(withPayload(fromK1, payloadOf(fromK1)), 'api-keys', 'org-1', f)).toEqual(pos); // the helper changes nothing by itself
      // still bound to listing, scope and filters under a non-active key
      expect(() => k2Active.decode(fromK1, 'tool-calls', 'org-1', f)).toThrow(/cursor/);
      expect(() => k2Active.decode(fromK1, 'api-keys', 'org-2', f)).toThrow(/cursor/);
    });

    it('the refusal is the same 400 as for any bad cursor', () => {
      try {
        onlyK2.decode(k1Active.encode('tool-calls', 'org-1', f, pos), 'tool-calls', 'org-1', f);
        expect.unreachable();
      } catch (err) {
        expect(err).toMatchObject({ code: 'VALIDATION_FAILED' });
      }
    });
  });

  describe('cursors from before key ids (body.mac, v 1)', () => {
    const master = Buffer.alloc(32, 1);
    const legacy = (payload: object, key = master) => {
      const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
      return `${body}.${createHmac('sha256', cursorKey(key)).update(`cursor-v1.${body}`).digest('base64url')}`;
    };
    const v1 = { v: 1, k: 'tool-calls', o: 'org-1', f, t: pos.createdIso, i: pos.key };

    it('are taken when they verify under the active key, as before', () => {
      expect(codec.decode(legacy(v1), 'tool-calls', 'org-1', f)).toEqual(pos);
    });

    it('are refused under another key, with another version, or for another listing', () => {
      const k2Active = new LedgerCursorCodec({ keyring: { activeKeyId: 'k2', keys: new Map([['k2', Buffer.alloc(32, 2)], ['k1', master]]) } });
      expect(() => k2Active.decode(legacy(v1), 'tool-calls', 'org-1', f)).toThrow(/cursor/);
      expect(() => codec.decode(legacy(v1, Buffer.alloc(32, 3)), 'tool-calls', 'org-1', f)).toThrow(/cursor/);
      expect(() => codec.decode(legacy({ ...v1, v: 2 }), 'tool-calls', 'org-1', f)).toThrow(/cursor/);
      expect(() => codec.decode(legacy({ ...v1, v: 2, s: 'k1' }), 'tool-calls', 'org-1', f)).toThrow(/cursor/);
      expect(() => codec.decode(legacy({ ...v1, s: 'k1' }), 'tool-calls', 'org-1', f)).toThrow(/cursor/);
      expect(() => codec.decode(legacy(v1), 'ledger-events', 'org-1', f)).toThrow(/cursor/);
    });
  });
});
