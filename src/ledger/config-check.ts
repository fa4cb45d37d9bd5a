import { CanonicalJsonError, canonicalJson, sha256Hex } from '../common/canonical-json.js';
import { NIL_UUID } from '../common/ids.js';
import { FLAG_DEFAULTS, isFlagName } from '../orgs/feature-flags.service.js';
import { permissionsTag, type PermissionView } from '../permissions/tool-permissions.service.js';
import type { ChainReader, VerifyBreak } from './ledger-verifier.service.js';
import { FIRST_IN_CHAIN_ORDER, LAST_IN_CHAIN_ORDER } from './ledger-chain.js';

/**
 * The governance rows of an org against the events that recorded them, for chain verification: the gateway acts on
 * the rows (a flag, a permission, a key, the policy), which are not chained, so an UPDATE around it (tool calling
 * switched on, a write action enabled, a revoked key brought back, a rule weakened) left every chain intact and
 * verify ok. Each writer records its row on the chain in the same transaction (FeatureFlagsService.set,
 * ToolPermissionsService.replace, ApiKeysService.create and revoke, ensureBootstrapKey, PoliciesService.replace),
 * and has since the first release, so a row the events do not account for was written around the gateway. Each
 * check is one or two statements over the org's rows and the events of its type (ledger_events_org_type_idx), never
 * the org's whole history: the first break, in the order below, is answered.
 */
export async function firstConfigOffLedger(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  return (
    (await firstFlagOffLedger(db, orgId)) ??
    (await firstPermissionOffLedger(db, orgId)) ??
    (await firstPolicyOffLedger(db, orgId)) ??
    (await firstApiKeyOffLedger(db, orgId))
  );
}

/**
 * The org's last event of a type, with the metadata fields `fields` (SQL over `metadata`) picks. Two statements: the
 * event is found without its metadata (ledger_events_org_type_idx), then read by its id alone, as selecting the fields
 * while sorting made the database read (and detoast) the metadata of every event of the type, and a policy.changed
 * or tool_permissions.changed event may hold some 100 KB.
 */
async function lastEventOf<T>(db: ChainReader, orgId: string, type: string, fields: string): Promise<({ id: string; chain_seq: string | null } & T) | undefined> {
  const [last] = (await db.query(`SELECT id, chain_seq FROM runtime_ledger_events WHERE org_id = $1 AND type = $2 ORDER BY ${LAST_IN_CHAIN_ORDER('runtime_ledger_events')} LIMIT 1`, [orgId, type])) as {
    id: string;
    chain_seq: string | null;
  }[];
  if (!last) return undefined;
  const [picked] = (await db.query(`SELECT ${fields} FROM runtime_ledger_events WHERE id = $1`, [last.id])) as T[];
  return { ...last, ...picked! };
}

/** A break at an event of the chain, or at none (chainSeq 0) for a row no event recorded. */
const at = (r: { id: string | null; chain_seq: string | null }): Pick<VerifyBreak, 'chainSeq' | 'eventId'> => ({
  chainSeq: Number(r.chain_seq ?? 0),
  eventId: r.id,
});

/**
 * Feature flags: the value the gateway reads for each flag (its row's, else the default) must be the `to` of the
 * flag's last feature_flag.changed event, else (no event) the default; and a row's reason must have the SHA-256 the
 * last event recorded (`reasonDigest`, recorded since this release: older events are not compared on it). Rows of
 * flags the gateway does not have are never read by it, and not checked; a flag is named in the reason only as one
 * of FLAG_DEFAULTS (a fixed name).
 */
export async function firstFlagOffLedger(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  const rows = (await db.query(
    `WITH last AS (
       SELECT DISTINCT ON (e.metadata->>'flag') e.metadata->>'flag' AS flag, e.id, e.seq, e.chain_seq, e.metadata->'to' AS to_value,
              e.metadata ? 'reasonDigest' AS has_reason_digest, e.metadata->>'reasonDigest' AS reason_digest
         FROM runtime_ledger_events e
        WHERE e.org_id = $1 AND e.type = 'feature_flag.changed' AND e.metadata ? 'flag'
        ORDER BY e.metadata->>'flag', ${LAST_IN_CHAIN_ORDER('e')})
     SELECT coalesce(l.flag, f.flag) AS flag, l.id, l.chain_seq, l.to_value, l.has_reason_digest, l.reason_digest,
            f.flag IS NOT NULL AS has_row, f.enabled,
            CASE WHEN f.reason IS NULL OR f.reason = '' THEN NULL ELSE encode(sha256(convert_to(f.reason, 'UTF8')), 'hex') END AS row_reason_digest
       FROM last l
       FULL JOIN (SELECT flag, enabled, reason FROM feature_flags WHERE org_id = $1) f ON f.flag = l.flag
      ORDER BY l.chain_seq NULLS LAST, l.seq NULLS LAST, 1`,
    [orgId],
  )) as {
    flag: string; id: string | null; chain_seq: string | null; to_value: unknown; has_reason_digest: boolean | null; reason_digest: string | null;
    has_row: boolean; enabled: boolean | null; row_reason_digest: string | null;
  }[];
  for (const r of rows) {
    if (!isFlagName(r.flag)) continue;
    const expected = r.id === null ? FLAG_DEFAULTS[r.flag] : r.to_value === true;
    const actual = r.has_row ? r.enabled === true : FLAG_DEFAULTS[r.flag];
    if (actual !== expected) {
      return r.id === null
        ? { ...at(r), reason: `feature flag ${r.flag} is ${String(actual)} in the database, but no feature_flag.changed event on the ledger set it (its default is ${String(expected)})` }
        : { ...at(r), reason: `feature flag ${r.flag} is ${String(actual)} in the database, but its last feature_flag.changed event on the ledger set it ${String(expected)}` };
    }
    if (r.id !== null && r.has_row && r.has_reason_digest && r.row_reason_digest !== r.reason_digest) {
      return { ...at(r), reason: `the reason stored with feature flag ${r.flag} is not the one its last feature_flag.changed event recorded (reasonDigest)` };
    }
  }
  return null;
}

/**
 * Tool permissions: the org's rows must be the set its last tool_permissions.changed event recorded: by the set's
 * ETag (`setTag`, recorded since this release), else (an older event) by its `count` and `enabled` (an event holding
 * neither, which the gateway never wrote, is not checked); with no event, there are none. Reads at most one row more
 * than the event counted, so rows inserted in bulk around the gateway cost no more than the set it recorded (at most
 * 1,000, the PUT's limit).
 */
export async function firstPermissionOffLedger(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  const last = await lastEventOf<{ set_tag: unknown; count: unknown; enabled: unknown }>(
    db,
    orgId,
    'tool_permissions.changed',
    `metadata->'setTag' AS set_tag, metadata->'count' AS count, metadata->'enabled' AS enabled`,
  );
  const counted = last && Number.isSafeInteger(last.count) && (last.count as number) >= 0 ? (last.count as number) : undefined;
  if (last && counted === undefined && typeof last.set_tag !== 'string') return null; // an event that says nothing of the set: nothing to tell
  const rows = (await db.query(
    `SELECT tool_name AS "toolName", action, specialist_id AS "specialistId", enabled FROM tool_permissions WHERE org_id = $1 LIMIT ${(counted ?? 1_000) + 1}`,
    [orgId],
  )) as PermissionView[];
  if (!last) {
    return rows.length > 0 ? { chainSeq: 0, eventId: null, reason: 'tool permission rows are stored, but no tool_permissions.changed event on the ledger recorded any' } : null;
  }
  const same =
    typeof last.set_tag === 'string'
      ? permissionsTag(rows) === last.set_tag
      : rows.length === counted && rows.filter((r) => r.enabled).length === last.enabled;
  if (same) return null;
  return { ...at(last), reason: `the org's tool permission rows are not the set its last tool_permissions.changed event on the ledger recorded (${typeof last.set_tag === 'string' ? 'setTag' : 'count or enabled'})` };
}

/**
 * The policy: the org's policies row must be what its last policy.changed event recorded: the same version, and
 * rules with the event's `rulesDigest` (recorded since this release: an older event is compared on the version
 * only); no event, no row; an event, a row (nothing deletes one).
 */
export async function firstPolicyOffLedger(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  const last = await lastEventOf<{ version: unknown; rules_digest: unknown }>(db, orgId, 'policy.changed', `metadata->'version' AS version, metadata->'rulesDigest' AS rules_digest`);
  const [row] = (await db.query('SELECT version, rules FROM policies WHERE org_id = $1', [orgId])) as { version: number; rules: unknown }[];
  if (!last) return row ? { chainSeq: 0, eventId: null, reason: 'a policy is stored, but no policy.changed event on the ledger recorded one' } : null;
  if (!row) return { ...at(last), reason: 'the org has no policy stored, but its last policy.changed event on the ledger stored one' };
  if (row.version !== last.version) return { ...at(last), reason: 'the stored policy is not the version its last policy.changed event on the ledger recorded' };
  if (typeof last.rules_digest !== 'string') return null;
  let digest: string | null;
  try {
    digest = sha256Hex(canonicalJson(row.rules));
  } catch (err) {
    if (!(err instanceof CanonicalJsonError)) throw err;
    digest = null; // no canonical form: not the rules the event's digest was taken of
  }
  return digest === last.rules_digest ? null : { ...at(last), reason: 'the stored policy rules are not the ones its last policy.changed event on the ledger recorded (rulesDigest)' };
}

/**
 * API keys of the org (of the platform: org_id null, on the nil org's chain, where their events are): keys are never
 * deleted, so every key must have a row, and every row its api_key.created event, with the role that event recorded;
 * a key is revoked exactly when an api_key.revoked event names it; its stored hash is the one its event recorded by
 * digest (keyHashDigest; keys created before it was recorded are not compared). A key added, raised to another role,
 * given another secret, brought back after its revocation or moved to another org around the gateway is a break. One statement: the org's keys
 * against its key events, the first disagreement in chain order (a row with no event last).
 */
export async function firstApiKeyOffLedger(db: ChainReader, orgId: string): Promise<VerifyBreak | null> {
  // Two spellings, each an index read of api_keys_org_idx (IS NOT DISTINCT FROM is none: it read every org's keys).
  const platform = orgId === NIL_UUID;
  const [r] = (await db.query(
    `WITH created AS (
       SELECT DISTINCT ON (e.metadata->>'apiKeyId') e.metadata->>'apiKeyId' AS key_id, e.id, e.seq, e.chain_seq, e.metadata->>'role' AS role,
              e.metadata->>'keyHashDigest' AS hash_digest
         FROM runtime_ledger_events e
        WHERE e.org_id = $1 AND e.type = 'api_key.created' AND e.metadata ? 'apiKeyId'
        ORDER BY e.metadata->>'apiKeyId', ${FIRST_IN_CHAIN_ORDER('e')}),
     revoked AS (
       SELECT DISTINCT ON (e.metadata->>'apiKeyId') e.metadata->>'apiKeyId' AS key_id, e.id, e.seq, e.chain_seq
         FROM runtime_ledger_events e
        WHERE e.org_id = $1 AND e.type = 'api_key.revoked' AND e.metadata ? 'apiKeyId'
        ORDER BY e.metadata->>'apiKeyId', ${FIRST_IN_CHAIN_ORDER('e')}),
     keys AS (SELECT id::text AS key_id, role, revoked_at IS NOT NULL AS revoked, encode(sha256(key_hash), 'hex') AS hash_digest
                FROM api_keys WHERE ${platform ? 'org_id IS NULL' : 'org_id = $1::uuid'}),
     joined AS (
       SELECT k.key_id IS NOT NULL AS has_row, k.role AS row_role, k.revoked, c.id AS created_id, c.chain_seq AS created_chain_seq, c.seq AS created_seq,
              c.role, r.id AS revoked_id, r.chain_seq AS revoked_chain_seq, r.seq AS revoked_seq,
              -- Keys created by an earlier release have no keyHashDigest on their event: their hash is not compared.
              (c.hash_digest IS NULL OR c.hash_digest = k.hash_digest) AS hash_ok
         FROM keys k
         FULL JOIN created c ON c.key_id = k.key_id
         FULL JOIN revoked r ON r.key_id = coalesce(k.key_id, c.key_id))
     SELECT CASE
              WHEN NOT has_row THEN 'an API key an event on the ledger recorded is missing from the database (keys are never deleted)'
              WHEN created_id IS NULL THEN 'an API key is stored that no api_key.created event on the ledger recorded'
              WHEN row_role IS DISTINCT FROM role THEN 'an API key''s role is not the one its api_key.created event on the ledger recorded'
              WHEN NOT hash_ok THEN 'an API key''s secret is not the one its api_key.created event on the ledger recorded (keyHashDigest)'
              WHEN revoked_id IS NOT NULL AND NOT revoked THEN 'an API key is live, but an api_key.revoked event on the ledger revoked it'
              ELSE 'an API key is revoked, but no api_key.revoked event on the ledger recorded it'
            END AS reason,
            -- The event the row is held to: the revocation it undid, else the key's creation, else (no creation) its revocation.
            CASE WHEN has_row AND created_id IS NOT NULL AND row_role IS NOT DISTINCT FROM role AND hash_ok AND revoked_id IS NOT NULL THEN revoked_id ELSE coalesce(created_id, revoked_id) END AS id,
            CASE WHEN has_row AND created_id IS NOT NULL AND row_role IS NOT DISTINCT FROM role AND hash_ok AND revoked_id IS NOT NULL THEN revoked_chain_seq
                 ELSE coalesce(created_chain_seq, revoked_chain_seq) END AS chain_seq
       FROM joined
      WHERE NOT has_row OR created_id IS NULL OR row_role IS DISTINCT FROM role OR NOT hash_ok OR revoked <> (revoked_id IS NOT NULL)
      ORDER BY coalesce(created_chain_seq, revoked_chain_seq) NULLS LAST, coalesce(created_seq, revoked_seq) NULLS LAST
      LIMIT 1`,
    [orgId],
  )) as { reason: string; id: string | null; chain_seq: string | null }[];
  return r ? { ...at(r), reason: r.reason } : null;
}
