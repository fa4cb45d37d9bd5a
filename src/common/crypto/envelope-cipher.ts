import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { canonicalJson } from '../canonical-json.js';
import type { MasterKeyring } from '../../config/app-config.js';

export interface Envelope {
  keyId: string;
  iv: Buffer;
  ciphertext: Buffer;
  authTag: Buffer;
}

/**
 * The prefix of the current fingerprint form (bound to org + integration). Earlier forms: "sha256:" (unkeyed) and
 * "hmac:" (keyed, unbound); the key rotation replaces both.
 */
export const FINGERPRINT_PREFIX = 'hmac-v2:';

export class DecryptionError extends Error {
  constructor() {
    // Deliberately vague: the reason (wrong key, tampering, wrong binding) is not the caller's business.
    super('ciphertext could not be decrypted');
    this.name = 'DecryptionError';
  }
}

/**
 * AES-256-GCM with a random 96-bit IV per encryption and a 128-bit tag. The
 * associated data binds a ciphertext to where it belongs (org id + purpose), so
 * a row copied to another org or another column fails to decrypt.
 */
export class EnvelopeCipher {
  private fingerprintKey?: { keyId: string; key: Buffer };

  constructor(private readonly keyring: MasterKeyring) {}

  get activeKeyId(): string {
    return this.keyring.activeKeyId;
  }

  /** Ids of every loaded key (rotation tries them all on a row whose key id is unknown). */
  get keyIds(): string[] {
    return [...this.keyring.keys.keys()];
  }

  encrypt(plaintext: Buffer | string, aad: string): Envelope {
    const key = this.keyring.keys.get(this.keyring.activeKeyId);
    if (!key) throw new Error('active master key is not loaded');
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: 16 });
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return { keyId: this.keyring.activeKeyId, iv, ciphertext, authTag: cipher.getAuthTag() };
  }

  decrypt(env: Envelope, aad: string): Buffer {
    const key = this.keyring.keys.get(env.keyId);
    if (!key || env.iv.length !== 12 || env.authTag.length !== 16) throw new DecryptionError();
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, env.iv, { authTagLength: 16 });
      decipher.setAAD(Buffer.from(aad, 'utf8'));
      decipher.setAuthTag(env.authTag);
      return Buffer.concat([decipher.update(env.ciphertext), decipher.final()]);
    } catch {
      throw new DecryptionError();
    }
  }

  encryptJson(value: unknown, aad: string): Envelope {
    return this.encrypt(JSON.stringify(value), aad);
  }

  /**
   * A short fingerprint of a secret config, safe to show and log: an HMAC under a key derived from the active
   * master key (HKDF, info "credential-fingerprint-v2") over `binding` (the config's associated data: org +
   * integration) and its canonical JSON (key order does not matter). Keyed, so whoever reads it (an ops key reads
   * the credentials.* events) cannot test guesses of a weak secret against it; bound, so equal configs of two
   * orgs (or integrations) differ and a PUT into one org is no oracle for another's secret. Equal fingerprints
   * mean equal configs of one org and integration under one master key; the key rotation recomputes them.
   * Rows written before the binding keep their unbound "hmac:" fingerprint until the rotation recomputes it.
   */
  fingerprint(value: unknown, binding: string): string {
    const keyId = this.keyring.activeKeyId;
    if (this.fingerprintKey?.keyId !== keyId) {
      const master = this.keyring.keys.get(keyId);
      if (!master) throw new Error('active master key is not loaded');
      this.fingerprintKey = { keyId, key: fingerprintKeyOf(master) };
    }
    return fingerprintWith(this.fingerprintKey.key, value, binding);
  }

  /**
   * The fingerprint `value` had when master key `keyId` was the active one (the ledger verifier checks a stored config
   * against the fingerprint its event recorded then); undefined when that key is not loaded here.
   */
  fingerprintUnder(keyId: string, value: unknown, binding: string): string | undefined {
    if (keyId === this.keyring.activeKeyId) return this.fingerprint(value, binding);
    const master = this.keyring.keys.get(keyId);
    return master ? fingerprintWith(fingerprintKeyOf(master), value, binding) : undefined;
  }

  decryptJson<T = unknown>(env: Envelope, aad: string): T {
    return JSON.parse(this.decrypt(env, aad).toString('utf8')) as T;
  }
}

const fingerprintKeyOf = (master: Buffer): Buffer => Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), 'credential-fingerprint-v2', 32));

// An array: the binding and the config cannot run into each other.
const fingerprintWith = (key: Buffer, value: unknown, binding: string): string =>
  FINGERPRINT_PREFIX + createHmac('sha256', key).update(canonicalJson([binding, value])).digest('hex').slice(0, 16);
