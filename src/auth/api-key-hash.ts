import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const PREFIX = 'tgw_';

/** 32 random bytes (256 bits), base64url, with a recognisable prefix for secret scanners. */
export function generateApiKey(): string {
  return PREFIX + randomBytes(32).toString('base64url');
}

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/**
 * What an api_key.created event records of the key's stored hash: its SHA-256 (hex), so verify finds a key_hash
 * swapped around the gateway (a made-up key put in a real one's place) as it finds a role raised. It tells nothing of
 * the key: the hash of a hash of 32 random bytes.
 */
export function keyHashDigest(keyHash: Buffer): string {
  return createHash('sha256').update(keyHash).digest('hex');
}

export function sameHash(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Shown in listings so a human can tell keys apart; too short to help an attacker. A key of ours
 * shows its first characters after `tgw_`; any other (a BOOTSTRAP_ADMIN_KEY the operator chose)
 * shows a bit of its hash, not the first characters of the secret itself.
 */
export function keyPrefix(key: string): string {
  return key.startsWith(PREFIX) ? key.slice(0, PREFIX.length + 6) : `cfg:${hashApiKey(key).toString('hex').slice(0, 6)}`;
}
