import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { actorOf, type Principal } from '../auth/principal.js';
import { AppError } from '../common/errors/app-error.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { FeatureFlagEntity } from './feature-flag.entity.js';

/** Every flag an org has, with its default. Unknown flags are 404. */
export const FLAG_DEFAULTS = { tool_calling_enabled: false } as const;
export type FlagName = keyof typeof FLAG_DEFAULTS;
export const isFlagName = (f: string): f is FlagName => Object.hasOwn(FLAG_DEFAULTS, f);

/** Cross-replica staleness bound for the hot-path cache; local changes apply at once. */
const CACHE_TTL_MS = 1_000;

@Injectable()
export class FeatureFlagsService {
  private readonly cache = new Map<string, { flags: Record<FlagName, boolean>; until: number }>();

  constructor(
    private readonly ds: DataSource,
    private readonly events: LedgerEventsService,
  ) {}

  async all(orgId: string): Promise<Record<FlagName, boolean>> {
    const hit = this.cache.get(orgId);
    if (hit && hit.until > performance.now()) return hit.flags;
    const rows = await this.ds.getRepository(FeatureFlagEntity).find({ where: { orgId } });
    const flags = { ...FLAG_DEFAULTS } as Record<FlagName, boolean>;
    for (const r of rows) if (isFlagName(r.flag)) flags[r.flag] = r.enabled;
    this.cache.set(orgId, { flags, until: performance.now() + CACHE_TTL_MS });
    return flags;
  }

  async isEnabled(orgId: string, flag: FlagName): Promise<boolean> {
    return (await this.all(orgId))[flag];
  }

  async set(actor: Principal, orgId: string, flag: string, enabled: boolean, reason?: string) {
    if (!isFlagName(flag)) throw new AppError('NOT_FOUND', `unknown feature flag "${flag.slice(0, 64)}"`);
    const updatedAt = new Date();
    await this.ds.transaction(async (m) => {
      // Lock the row (or the org's flag slot) so two admins' changes record correct from/to values.
      await m.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`flag:${orgId}:${flag}`]);
      const prev = await m.getRepository(FeatureFlagEntity).findOne({ where: { orgId, flag } });
      const from = prev ? prev.enabled : FLAG_DEFAULTS[flag];
      await m.getRepository(FeatureFlagEntity).upsert(
        { orgId, flag, enabled, reason: reason ?? null, updatedBy: actor.keyId, updatedAt },
        ['orgId', 'flag'],
      );
      await this.events.append(
        [{ orgId, type: 'feature_flag.changed', actor: actorOf(actor), metadata: { flag, from, to: enabled, ...(reason ? { reasonGiven: true } : {}) } }],
        m,
      );
    });
    this.cache.delete(orgId);
    return { flag, enabled, updatedAt: updatedAt.toISOString(), updatedBy: actor.keyId };
  }
}
