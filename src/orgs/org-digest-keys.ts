import { Injectable } from '@nestjs/common';
import { Sql } from '../db/sql.js';

/** Orgs whose digest key is kept in memory; far more than any deployment has (32 bytes each). */
const KEYS_MAX = 100_000;

/**
 * Each org's action digest key (orgs.digest_key: 32 random bytes, made with the org and never changed, not even by a
 * master key rotation), for actionDigest. Every tool call needs it, so it is read once per org and process and kept:
 * the key never changes, so there is nothing to invalidate and no TTL (no query per call). Orgs asked for at once
 * share one read; a failed read is not kept.
 */
@Injectable()
export class OrgDigestKeys {
  private readonly keys = new Map<string, Promise<Buffer>>();

  constructor(private readonly sql: Sql) {}

  get(orgId: string): Promise<Buffer> {
    const known = this.keys.get(orgId);
    if (known) return known;
    if (this.keys.size >= KEYS_MAX) this.keys.delete(this.keys.keys().next().value!);
    const load = this.load(orgId);
    this.keys.set(orgId, load);
    load.catch(() => {
      if (this.keys.get(orgId) === load) this.keys.delete(orgId);
    });
    return load;
  }

  private async load(orgId: string): Promise<Buffer> {
    const [row] = await this.sql.prepared<{ digest_key: Buffer }>('SELECT digest_key FROM orgs WHERE id = $1', [orgId]);
    if (!row) throw new Error(`org ${orgId} not found for its digest key`);
    return row.digest_key;
  }
}
