import { randomUUID } from 'node:crypto';

export const newId = (): string => randomUUID();

export const NIL_UUID = '00000000-0000-0000-0000-000000000000';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (v: unknown): v is string => typeof v === 'string' && UUID_RE.test(v);

/**
 * UUIDs are case-insensitive (RFC 9562) but compared as text in places that
 * must agree with the database's lower-case spelling: cache keys, advisory
 * locks and the associated data the credentials are encrypted against. Every
 * id from a path, query or body goes through this at the edge.
 */
export const canonicalUuid = <T>(v: T): T => (isUuid(v) ? (v.toLowerCase() as T) : v);
