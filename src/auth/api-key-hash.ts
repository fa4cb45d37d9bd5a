import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const PREFIX = 'tgw_';

/** 32 random bytes (256 bits), base64url, with a recognisable prefix for secret scanners. */
export function generateApiKey(): string {
  return PREFIX + randomBytes(32).toString('base64url');
}

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

export function sameHash(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Shown in listings so a human can tell keys apart; too short to help an attacker. */
export function keyPrefix(key: string): string {
  return key.slice(0, PREFIX.length + 6);
}
