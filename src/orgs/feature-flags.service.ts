import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { actorOf, type Principal } from '../auth/principal.js';
import { InvalidatingCache } from '../common/cache/invalidating-cache.js';
import { isEchoableFieldName } from '../common/echoable-field-name.js';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { sha256Hex } from '../common/canonical-json.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { FeatureFlagEntity } from './feature-flag.entity.js';
import { holdActorKey, managerQuery } from '../auth/actor-key-hold.js';
import { redactFreeTextWithin } from '../redaction/redaction.service.js';
import { FLAG_REASON_MAX } from './orgs.dto.js';
import { flagLock, LOCK_SQL } from '../db/advisory-locks.js';

/** Every flag an org has, with its default. Unknown flags are 404. */
export const FLAG_DEFAULTS = { tool_calling_enabled: false } as const;
export type FlagName = keyof typeof FLAG_DEFAULTS;
export const isFlagName = (f: string): f is FlagName => Object.hasOwn(FLAG_DEFAULTS, f);

/**
 * The 404 detail for a flag name we do not have. The name is a path segment an admin may have pasted a token
 * into (shpat_0123…): it is named back only when it looks like a name (as the permissions 400 does), and the
 * known flags are listed either way (they are fixed names, never secrets).
 */
export function unknownFlagDetail(flag: string): string {
  const known = `(known: ${Object.keys(FLAG_DEFAULTS).join(', ')})`;
  return isEchoableFieldName(flag) ? `unknown feature flag "${flag}" ${known}` : `unknown feature flag, not named as it does not look like a flag name ${known}`;
}

/** Cross-replica staleness bound for the hot-path cache; local changes apply at once. */
const CACHE_TTL_MS = 1_000;

@Injectable()
export class FeatureFlagsService {
  /** orgId → flags. A read in flight when `set` commits is never cached nor shared with later callers (see InvalidatingCache). */
  private readonly cache = new InvalidatingCache<string, Record<FlagName, boolean>>({ ttlMs: CACHE_TTL_MS });

  constructor(
    private readonly ds: DataSource,
    private readonly events: LedgerEventsService,
    private readonly clock: Clock,
  ) {}

  /**
   * The admin read: from the database, not the hot-path cache, so a change
   * just made on another replica is seen (the cache may hold the old value).
   */
  all(orgId: string): Promise<Record<FlagName, boolean>> {
    return this.load(orgId);
  }

  private cached(orgId: string): Promise<Readonly<Record<FlagName, boolean>>> {
    return this.cache.get(orgId, () => this.load(orgId));
  }

  private async load(orgId: string): Promise<Record<FlagName, boolean>> {
    const rows = await this.ds.getRepository(FeatureFlagEntity).find({ where: { orgId } });
    const flags = { ...FLAG_DEFAULTS } as Record<FlagName, boolean>;
    for (const r of rows) if (isFlagName(r.flag)) flags[r.flag] = r.enabled;
    return flags;
  }

  /** Every tool call asks: read from the cache, no copy. */
  async isEnabled(orgId: string, flag: FlagName): Promise<boolean> {
    return (await this.cached(orgId))[flag];
  }

  /** Forget the cached flags (the intent statement found them changed on another replica). */
  forget(orgId: string): void {
    this.cache.invalidate(orgId);
  }

  async set(actor: Principal, orgId: string, flag: string, enabled: boolean, reason?: string) {
    if (!isFlagName(flag)) throw new AppError('NOT_FOUND', unknownFlagDetail(flag));
    // An empty reason is none given, on the row as on the event. Kept redacted, as every free text the gateway keeps and
    // shows back (ops keys read it): a card number or token pasted into it is [REDACTED].
    const given = reason ? redactFreeTextWithin(reason, FLAG_REASON_MAX) : null;
    // The database's time (the Clock), as the calls' and events' times are, and taken once this change's turn has come.
    let updatedAt = this.clock.now();
    try {
      await this.ds.transaction(async (m) => {
        // Lock the row (or the org's flag slot) so two admins' changes record correct from/to values.
        await m.query(LOCK_SQL, [flagLock(orgId, flag)]);
        updatedAt = this.clock.now();
        const prev = await m.getRepository(FeatureFlagEntity).findOne({ where: { orgId, flag } });
        const from = prev ? prev.enabled : FLAG_DEFAULTS[flag];
        await m.getRepository(FeatureFlagEntity).upsert(
          { orgId, flag, enabled, reason: given, updatedBy: actor.keyId, updatedAt },
          ['orgId', 'flag'],
        );
        // After the waits (for the lock above, and for calls being recorded, which hold the flag row FOR SHARE): a
        // revocation committed meanwhile is read (holdActorKey), and the key is not held while this waits.
        await holdActorKey(managerQuery(m), actor);
        // The reason lives on the row only until the next PUT replaces it: the event keeps its SHA-256 (lowercase hex of
        // its UTF-8, as kept; null: none given), as an approval decision's event keeps its reason's (reasonDigest), so a reason
        // kept elsewhere (a change ticket) can be checked against the ledger afterwards. A digest, not the text: a
        // reason may name people, and the ledger is never erased. Ledger verify holds the row's reason to it.
        const reasonDigest = given === null ? null : sha256Hex(given);
        await this.events.append(
          [{ orgId, type: 'feature_flag.changed', actor: actorOf(actor), metadata: { flag, from, to: enabled, ...(given ? { reasonGiven: true } : {}), reasonDigest } }],
          m,
        );
      });
    } finally {
      // After the commit (and even if it failed: it may have committed), before the 200: a flags read
      // that began before the commit must not be cached or served to later calls on this replica.
      this.cache.invalidate(orgId);
    }
    return { flag, enabled, updatedAt: updatedAt.toISOString(), updatedBy: actor.keyId };
  }
}
