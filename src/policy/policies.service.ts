import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { actorOf, type Principal } from '../auth/principal.js';
import { InvalidatingCache } from '../common/cache/invalidating-cache.js';
import { isEchoableFieldName, UNNAMED_UNKNOWN_FIELD } from '../common/echoable-field-name.js';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { ToolCatalogService } from '../catalog/tool-catalog.service.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { catalogRuleChecks } from './policy-rule-values.js';
import { validatePolicyRules, type KnownTools, type PolicyRulesValidation } from './policy-rules.validator.js';
import type { PolicyRule } from './policy.types.js';
import { PolicyEntity } from './policy.entity.js';
import { holdActorKey, managerQuery } from '../auth/actor-key-hold.js';
import { assertPreconditions, type Preconditions } from '../common/http/if-match.js';

/** The ETag of a policy version (0: never set): every PUT makes a new version. */
export const policyTag = (version: number): string => String(version);

/** Cross-replica staleness bound for the hot-path cache; local changes apply at once. */
const CACHE_TTL_MS = 1_000;

/** null rules: the stored row fails validation (evaluation fails closed). */
export interface DecisionRules {
  rules: PolicyRule[] | null;
  version: number;
}

export interface PolicyView {
  rules: PolicyRule[];
  version: number;
  updatedAt: string | null;
  /** Only when the stored rules are not valid (a hand-edited row): why, and that every call of the org is blocked meanwhile. */
  unusable?: string[];
}

@Injectable()
export class PoliciesService {
  /**
   * orgId → validated rules; null (a row that fails validation) is answered but not cached.
   * A read in flight when `replace` commits is never cached nor shared with later callers (see InvalidatingCache).
   */
  private readonly cache = new InvalidatingCache<string, DecisionRules>({ ttlMs: CACHE_TTL_MS, cacheable: (d) => d.rules !== null });

  /** What a PUT checks new rules against: the catalog's names and params, and the values a call can carry. */
  private readonly known: KnownTools;

  constructor(
    private readonly ds: DataSource,
    private readonly events: LedgerEventsService,
    private readonly clock: Clock,
    catalog: ToolCatalogService,
  ) {
    this.known = catalogRuleChecks(catalog);
  }

  async get(orgId: string): Promise<PolicyView> {
    const stored = await this.stored(orgId);
    if (!stored) return { rules: [], version: 0, updatedAt: null };
    const { row, checked } = stored;
    const view: PolicyView = { rules: row.rules as PolicyRule[], version: row.version, updatedAt: row.updatedAt.toISOString() };
    if (checked.ok) return view;
    // Rules the pipeline refuses block every call (fail closed, loadRules): the admin reading them must see that, not
    // "no rules" (a jsonb null) or a body of another shape.
    return { ...view, rules: Array.isArray(row.rules) ? (row.rules as PolicyRule[]) : [], unusable: [...checked.errors, 'every tool call of the org is blocked (POLICY_BLOCKED) until valid rules are PUT'] };
  }

  /** The org's stored policy (none: never set), checked as on save: a hand-edited row can fail the check. */
  private async stored(orgId: string): Promise<{ row: PolicyEntity; checked: PolicyRulesValidation } | undefined> {
    const row = await this.ds.getRepository(PolicyEntity).findOne({ where: { orgId } });
    return row ? { row, checked: validatePolicyRules(row.rules) } : undefined;
  }

  /**
   * The rules the pipeline evaluates, with the version they are (0: no policy stored). Stored rules were
   * validated on save; they are re-validated here so a hand-edited row fails closed. The version lets
   * the intent statement check the rules are still the org's when it commits (ToolCallLedger.writeIntent).
   */
  async rulesFor(orgId: string): Promise<DecisionRules> {
    return this.cache.get(orgId, () => this.loadRules(orgId));
  }

  /** Forget the cached rules (the intent statement found them replaced on another replica). */
  forget(orgId: string): void {
    this.cache.invalidate(orgId);
  }

  private async loadRules(orgId: string): Promise<DecisionRules> {
    const stored = await this.stored(orgId);
    if (!stored) return { rules: [], version: 0 };
    return { rules: stored.checked.ok ? stored.checked.rules : null, version: stored.row.version };
  }

  /**
   * Replaces the org's rules. `ifMatch` (the If-Match header): the version's ETag the change was made against; when
   * another PUT came first, 412 PRECONDITION_FAILED and nothing is written (see if-match.ts).
   */
  async replace(actor: Principal, orgId: string, body: unknown, preconditions?: Preconditions): Promise<PolicyView> {
    const input = body as { rules?: unknown } | undefined;
    if (!input || typeof input !== 'object' || Array.isArray(input)) throw new AppError('VALIDATION_FAILED', 'body must be {"rules": [...]}');
    const extra = Object.keys(input).filter((k) => k !== 'rules');
    if (extra.length) {
      const named = extra.find(isEchoableFieldName); // never a key that may be a pasted secret
      throw new AppError('VALIDATION_FAILED', named ? `${named}: property should not exist` : `${UNNAMED_UNKNOWN_FIELD}; the body is {"rules": [...]}`);
    }
    // New rules must name what the catalog has, with values a call can carry; stored ones are read as they are
    // (a catalog change must not make them fail).
    const checked = validatePolicyRules(input.rules, this.known);
    if (!checked.ok) throw new AppError('VALIDATION_FAILED', checked.errors.join('; '), { fields: { errors: checked.errors } });
    // The database's time (the Clock), as the calls' and events' times are, and taken once this change's turn has come.
    let updatedAt = this.clock.now();
    let version = 1;
    try {
      await this.ds.transaction(async (m) => {
        // Every PUT of the org's policy in turn: the version If-Match is checked against is the one replaced (a row
        // lock would not cover an org with no policy row yet, where two first PUTs race to insert it).
        await m.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`policy:${orgId}`]);
        updatedAt = this.clock.now();
        if (preconditions) {
          const [current] = (await m.query('SELECT version FROM policies WHERE org_id = $1', [orgId])) as { version: number }[];
          assertPreconditions(preconditions, policyTag(current?.version ?? 0));
        }
        const [row] = (await m.query(
          `INSERT INTO policies (org_id, rules, version, updated_by, updated_at) VALUES ($1, $2::jsonb, 1, $3, $4)
           ON CONFLICT (org_id) DO UPDATE SET rules = EXCLUDED.rules, version = policies.version + 1, updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at
           RETURNING version`,
          [orgId, JSON.stringify(checked.rules), actor.keyId, updatedAt],
        )) as [{ version: number }];
        version = row.version;
        // After the upsert, which may have waited for another PUT's row: a revocation committed meanwhile is read.
        await holdActorKey(managerQuery(m), actor);
        await this.events.append(
          [{ orgId, type: 'policy.changed', actor: actorOf(actor), metadata: { version, ruleCount: checked.rules.length, ruleIds: checked.rules.map((r) => r.id) } }],
          m,
        );
      });
    } finally {
      // After the commit (and even if it failed: it may have committed), before the 200: a rules read
      // that began before the commit must not be cached or served to later calls on this replica.
      this.cache.invalidate(orgId);
    }
    return { rules: checked.rules, version, updatedAt: updatedAt.toISOString() };
  }
}
