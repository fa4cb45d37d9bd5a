import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { actorOf, type Principal } from '../auth/principal.js';
import { AppError } from '../common/errors/app-error.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { validatePolicyRules } from './policy-rules.validator.js';
import type { PolicyRule } from './policy.types.js';
import { PolicyEntity } from './policy.entity.js';

/** Cross-replica staleness bound for the hot-path cache; local changes apply at once. */
const CACHE_TTL_MS = 1_000;

export interface PolicyView {
  rules: PolicyRule[];
  version: number;
  updatedAt: string | null;
}

@Injectable()
export class PoliciesService {
  private readonly cache = new Map<string, { rules: PolicyRule[]; until: number }>();

  constructor(
    private readonly ds: DataSource,
    private readonly events: LedgerEventsService,
  ) {}

  async get(orgId: string): Promise<PolicyView> {
    const row = await this.ds.getRepository(PolicyEntity).findOne({ where: { orgId } });
    return { rules: (row?.rules as PolicyRule[] | undefined) ?? [], version: row?.version ?? 0, updatedAt: row?.updatedAt.toISOString() ?? null };
  }

  /** The rules the pipeline evaluates. Stored rules were validated on save; they are re-validated here so a hand-edited row fails closed. */
  async rulesFor(orgId: string): Promise<PolicyRule[] | null> {
    const hit = this.cache.get(orgId);
    if (hit && hit.until > performance.now()) return hit.rules;
    const row = await this.ds.getRepository(PolicyEntity).findOne({ where: { orgId } });
    if (!row) {
      this.cache.set(orgId, { rules: [], until: performance.now() + CACHE_TTL_MS });
      return [];
    }
    const checked = validatePolicyRules(row.rules);
    if (!checked.ok) return null;
    this.cache.set(orgId, { rules: checked.rules, until: performance.now() + CACHE_TTL_MS });
    return checked.rules;
  }

  async replace(actor: Principal, orgId: string, body: unknown): Promise<PolicyView> {
    const input = body as { rules?: unknown } | undefined;
    if (!input || typeof input !== 'object' || Array.isArray(input)) throw new AppError('VALIDATION_FAILED', 'body must be {"rules": [...]}');
    const extra = Object.keys(input).filter((k) => k !== 'rules');
    if (extra.length) throw new AppError('VALIDATION_FAILED', `${extra[0].slice(0, 64)}: property should not exist`);
    const checked = validatePolicyRules(input.rules);
    if (!checked.ok) throw new AppError('VALIDATION_FAILED', checked.errors.join('; '), { fields: { errors: checked.errors } });
    const updatedAt = new Date();
    let version = 1;
    await this.ds.transaction(async (m) => {
      const [row] = (await m.query(
        `INSERT INTO policies (org_id, rules, version, updated_by, updated_at) VALUES ($1, $2::jsonb, 1, $3, $4)
         ON CONFLICT (org_id) DO UPDATE SET rules = EXCLUDED.rules, version = policies.version + 1, updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at
         RETURNING version`,
        [orgId, JSON.stringify(checked.rules), actor.keyId, updatedAt],
      )) as [{ version: number }];
      version = row.version;
      await this.events.append(
        [{ orgId, type: 'policy.changed', actor: actorOf(actor), metadata: { version, ruleCount: checked.rules.length, ruleIds: checked.rules.map((r) => r.id) } }],
        m,
      );
    });
    this.cache.delete(orgId);
    return { rules: checked.rules, version, updatedAt: updatedAt.toISOString() };
  }
}
