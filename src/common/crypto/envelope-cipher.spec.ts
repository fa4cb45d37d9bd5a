import { describe, expect, it } from 'vitest';
import { createHash, createHmac, hkdfSync } from 'node:crypto';
import { canonicalJson } from '../canonical-json.js';
import { DecryptionError, EnvelopeCipher, FINGERPRINT_PREFIX, type Envelope } from './envelope-cipher.js';

const KEY_1 = Buffer.alloc(32, 7);
const KEY_2 = Buffer.alloc(32, 9);
const cipherWith = (activeKeyId: string, keys: [string, Buffer][]): EnvelopeCipher => new EnvelopeCipher({ activeKeyId, keys: new Map(keys) });

const SECRET = 'shpat_unit_secret_marker_0001';
const AAD = 'credentials:2f6b5a8e-0c1d-4e2f-9a3b-4c5d6e7f8a9b:shopify';

/** A copy of the envelope with one bit flipped in the named part. */
function flip(env: Envelope, part: 'iv' | 'ciphertext' | 'authTag', byte = 0): Envelope {
  const copy = Buffer.from(env[part]);
  copy[byte] ^= 0x01;
  return { ...env, [part]: copy };
}

/** The error decrypt throws; fails the test when it does not throw. */
function decryptError(c: EnvelopeCipher, env: Envelope, aad: string): unknown {
  try {
    c.decrypt(env, aad);
  } catch (err) {
    return err;
  }
  throw new Error('decrypt unexpectedly succeeded');
}

describe('EnvelopeCipher (AES-256-GCM)', () => {
  const c = cipherWith('k1', [['k1', KEY_1]]);

  it('round-trips text and JSON under the active key', () => {
    const env = c.encrypt(SECRET, AAD);
    expect(env.keyId).toBe('k1');
    expect(c.decrypt(env, AAD).toString('utf8')).toBe(SECRET);
    const config = { shopDomain: 'acme.myshopify.com', accessToken: SECRET, nested: { n: 1, u: 'é€😀' } };
    expect(c.decryptJson(c.encryptJson(config, AAD), AAD)).toEqual(config);
    expect(c.decrypt(c.encrypt('', AAD), AAD).length).toBe(0);
  });

  it('uses a fresh 12-byte IV per encryption and a 16-byte tag; ciphertext never holds the plaintext', () => {
    const a = c.encrypt(SECRET, AAD);
    const b = c.encrypt(SECRET, AAD);
    expect(a.iv).toHaveLength(12);
    expect(a.authTag).toHaveLength(16);
    expect(a.iv.equals(b.iv)).toBe(false);
    expect(a.ciphertext.equals(b.ciphertext)).toBe(false);
    expect(a.authTag.equals(b.authTag)).toBe(false);
    expect(a.ciphertext.toString('latin1')).not.toContain(SECRET);
  });

  it('refuses a key of another keyring with the same id', () => {
    const other = cipherWith('k1', [['k1', KEY_2]]);
    expect(() => other.decrypt(c.encrypt(SECRET, AAD), AAD)).toThrow(DecryptionError);
  });

  it('refuses an unknown key id, even when the loaded key is the right one', () => {
    const env = c.encrypt(SECRET, AAD);
    expect(() => c.decrypt({ ...env, keyId: 'k9' }, AAD)).toThrow(DecryptionError);
    expect(() => cipherWith('k2', [['k2', KEY_1]]).decrypt(env, AAD)).toThrow(DecryptionError);
  });

  it.each(['iv', 'ciphertext', 'authTag'] as const)('refuses a flipped bit in the %s, at every byte', (part) => {
    const env = c.encrypt(SECRET, AAD);
    for (let i = 0; i < env[part].length; i++) expect(() => c.decrypt(flip(env, part, i), AAD)).toThrow(DecryptionError);
  });

  it('refuses a truncated tag or IV (no short-tag forgery)', () => {
    const env = c.encrypt(SECRET, AAD);
    expect(() => c.decrypt({ ...env, authTag: env.authTag.subarray(0, 4) }, AAD)).toThrow(DecryptionError);
    expect(() => c.decrypt({ ...env, iv: env.iv.subarray(0, 8) }, AAD)).toThrow(DecryptionError);
  });

  it('binds the ciphertext to its associated data: another org or integration type fails', () => {
    const env = c.encrypt(SECRET, AAD);
    expect(() => c.decrypt(env, 'credentials:00000000-0000-4000-8000-000000000000:shopify')).toThrow(DecryptionError);
    expect(() => c.decrypt(env, AAD.replace(':shopify', ':amazon'))).toThrow(DecryptionError);
    expect(() => c.decrypt(env, AAD.replace('credentials:', 'result:'))).toThrow(DecryptionError);
    expect(() => c.decrypt(env, '')).toThrow(DecryptionError);
  });

  it('decrypts with any loaded key and encrypts with the active one (rotation)', () => {
    const old = c.encrypt(SECRET, AAD);
    const both = cipherWith('k2', [['k2', KEY_2], ['k1', KEY_1]]);
    expect(both.keyIds).toEqual(['k2', 'k1']);
    expect(both.decrypt(old, AAD).toString('utf8')).toBe(SECRET);
    const fresh = both.encrypt(SECRET, AAD);
    expect(fresh.keyId).toBe('k2');
    expect(() => c.decrypt(fresh, AAD)).toThrow(DecryptionError);
  });

  it('never puts plaintext, key material or the cause into the error', () => {
    const env = c.encrypt(SECRET, AAD);
    const cases = [flip(env, 'ciphertext'), flip(env, 'authTag'), { ...env, keyId: 'k9' }];
    for (const bad of cases) {
      const err = decryptError(c, bad, AAD);
      expect(err).toBeInstanceOf(DecryptionError);
      const text = `${String(err)} ${(err as Error).stack ?? ''} ${JSON.stringify(err)}`;
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(KEY_1.toString('base64'));
      expect((err as Error).message).toBe('ciphertext could not be decrypted');
    }
    expect(String(decryptError(c, env, 'credentials:other-org:shopify'))).not.toContain(SECRET);
  });

  it('fails loudly when the active key is not loaded instead of writing under another key', () => {
    expect(() => cipherWith('k2', [['k1', KEY_1]]).encrypt(SECRET, AAD)).toThrow(/active master key/);
  });
});

describe('fingerprint', () => {
  const c = cipherWith('k1', [['k1', KEY_1]]);
  const OTHER_ORG = 'credentials:00000000-0000-4000-8000-000000000000:shopify';

  it('is short, stable, non-reversible and never contains the secret', () => {
    const fp = c.fingerprint({ accessToken: SECRET }, AAD);
    expect(fp).toMatch(/^hmac-v2:[0-9a-f]{16}$/);
    expect(fp.startsWith(FINGERPRINT_PREFIX)).toBe(true);
    expect(c.fingerprint({ accessToken: SECRET }, AAD)).toBe(fp);
    expect(c.fingerprint({ accessToken: SECRET + 'x' }, AAD)).not.toBe(fp);
    expect(fp).not.toContain(SECRET);
  });

  it('does not depend on key order, and is keyed: no one without the master key can test a guess against it', () => {
    const config = { shopDomain: 'acme.myshopify.com', accessToken: 'hunter22' };
    expect(c.fingerprint({ accessToken: 'hunter22', shopDomain: 'acme.myshopify.com' }, AAD)).toBe(c.fingerprint(config, AAD));
    // What an ops key could do with an unkeyed hash of the config: hash each guess (in the same canonical form) and compare.
    const unkeyed = (v: unknown) => FINGERPRINT_PREFIX + createHash('sha256').update(canonicalJson([AAD, v])).digest('hex').slice(0, 16);
    expect(unkeyed(config)).not.toBe(c.fingerprint(config, AAD));
    // Keyed by the master key's bytes, not by anything public such as its id: the same id with other bytes differs.
    expect(cipherWith('k1', [['k1', KEY_2]]).fingerprint(config, AAD)).not.toBe(c.fingerprint(config, AAD));
    // Another master key gives other fingerprints (the key rotation recomputes the stored ones).
    expect(cipherWith('k2', [['k2', KEY_2]]).fingerprint(config, AAD)).not.toBe(c.fingerprint(config, AAD));
  });

  it('is bound to the org and integration: an equal config elsewhere has another fingerprint (no cross-org oracle)', () => {
    const config = { shopDomain: 'acme.myshopify.com', accessToken: 'hunter22' };
    const fp = c.fingerprint(config, AAD);
    expect(c.fingerprint(config, OTHER_ORG)).not.toBe(fp);
    expect(c.fingerprint(config, AAD.replace(':shopify', ':nango'))).not.toBe(fp);
    // Nor the form of earlier versions (keyed, over the config alone): a stored "hmac:" fingerprint is told apart by its prefix.
    const unbound = 'hmac:' + createHmac('sha256', Buffer.from(hkdfSync('sha256', KEY_1, Buffer.alloc(0), 'credential-fingerprint-v1', 32))).update(canonicalJson(config)).digest('hex').slice(0, 16);
    expect(fp.slice(FINGERPRINT_PREFIX.length)).not.toBe(unbound.slice('hmac:'.length));
  });
});
