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
import { NUMERIC_OPS, POLICY_LIMITS, type PolicyCondition, type PolicyRule } from './policy.types.js';
import { canonicalJson, sha256Hex } from '../common/canonical-json.js';
import { PolicyEntity } from './policy.entity.js';
import { holdActorKey, managerQuery } from '../auth/actor-key-hold.js';
import { redactFreeTextWithin } from '../redaction/redaction.service.js';
import { assertPreconditions, type Preconditions } from '../common/http/if-match.js';
import { LOCK_SQL, policyLock } from '../db/advisory-locks.js';

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

/** A where condition as policy.changed records it: its value as written, or the SHA-256 of its canonical JSON. */
export type ConditionOnRecord = Omit<PolicyCondition, 'value'> & { value?: unknown; valueDigest?: string };

/** A rule as policy.changed records it (see policyChangedRecord). */
export interface RuleOnRecord extends Omit<PolicyRule, 'match' | 'reason'> {
  match?: Omit<NonNullable<PolicyRule['match']>, 'where'> & { where?: ConditionOnRecord[] };
  reasonDigest?: string;
}

/**
 * What a policy.changed event records of the rules a PUT stored, besides the version: without it, a rule weakened
 * from require_expert_approval to allow and back left three events that differed only in their version, and the
 * policies row keeps only the current rules, so nobody could tell afterwards what the rules said when a call was
 * decided (its events follow the policy.changed of the rules it ran under, in chain order).
 * - `rulesDigest`: SHA-256 (lowercase hex) of the canonical JSON (keys sorted, no spaces) of the rules as stored,
 *   which GET answers: a copy kept elsewhere is checked against it, and ledger verify holds the row to it.
 * - `rules`: each rule as stored, but for what may be personal text: a reason (free text, like an approval's reason)
 *   becomes `reasonDigest`, the SHA-256 of its UTF-8, and an eq/ne/in value (a customer's id or email, say) becomes
 *   `valueDigest`, the SHA-256 of its canonical JSON. Decisions, risk levels, tool names, paths (catalog params,
 *   checked on PUT) and the numbers of gt/gte/lt/lte and the booleans of exists are configuration and stay as they
 *   are: what an auditor needs to see a threshold raised or a decision weakened. Never secrets: the ledger is kept
 *   for good and is read by ops keys. Bounded by the policy's limits (200 rules, 20 conditions each) and the 64 KiB
 *   admin body, and no larger than a few times the rules themselves (a digest for each value).
 */
export function policyChangedRecord(rules: readonly PolicyRule[]): { rulesDigest: string; rules: RuleOnRecord[] } {
  return { rulesDigest: sha256Hex(canonicalJson(rules)), rules: rules.map(ruleOnRecord) };
}

function ruleOnRecord({ match, reason, ...rest }: PolicyRule): RuleOnRecord {
  const rule: RuleOnRecord = { ...rest };
  if (match) {
    const { where, ...scope } = match;
    rule.match = where ? { ...scope, where: where.map(conditionOnRecord) } : scope;
  }
  if (reason !== undefined) rule.reasonDigest = sha256Hex(reason);
  return rule;
}

function conditionOnRecord({ path, op, value }: PolicyCondition): ConditionOnRecord {
  if (value === undefined) return { path, op };
  // A number or decimal text (gt…lte) or a boolean (exists): kept. Anything an eq, ne or in compares: digested.
  const kept = op === 'exists' || NUMERIC_OPS.includes(op);
  return kept ? { path, op, value } : { path, op, valueDigest: sha256Hex(canonicalJson(value)) };
}

/**
 * The rules with each `reason` redacted as every free text the gateway keeps and shows back (README): a rule's reason
 * is copied to every decision and approval it makes, which ops keys, experts and agents read. Applied to the rules a
 * PUT stores (once they passed the checks, the length limit as sent), and to stored rules as they are read: a policy
 * the previous release stored keeps its reason as written until it is PUT again.
 */
function withRedactedReasons(rules: PolicyRule[]): PolicyRule[] {
  return rules.map((r) => (r.reason === undefined ? r : { ...r, reason: redactFreeTextWithin(r.reason, POLICY_LIMITS.maxReasonLength) }));
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
    if (checked.ok) return { ...view, rules: withRedactedReasons(view.rules) };
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
    return { rules: stored.checked.ok ? withRedactedReasons(stored.checked.rules) : null, version: stored.row.version };
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
    const validated = validatePolicyRules(input.rules, this.known);
    if (!validated.ok) throw new AppError('VALIDATION_FAILED', validated.errors.join('; '), { fields: { errors: validated.errors } });
    const checked = { ...validated, rules: withRedactedReasons(validated.rules) };
    // The database's time (the Clock), as the calls' and events' times are, and taken once this change's turn has come.
    let updatedAt = this.clock.now();
    let version = 1;
    try {
      await this.ds.transaction(async (m) => {
        // Every PUT of the org's policy in turn: the version If-Match is checked against is the one replaced (a row
        // lock would not cover an org with no policy row yet, where two first PUTs race to insert it).
        await m.query(LOCK_SQL, [policyLock(orgId)]);
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
          [{ orgId, type: 'policy.changed', actor: actorOf(actor), metadata: { version, ruleCount: checked.rules.length, ruleIds: checked.rules.map((r) => r.id), ...policyChangedRecord(checked.rules) } }],
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
