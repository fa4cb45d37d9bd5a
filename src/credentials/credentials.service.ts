import { Injectable } from '@nestjs/common';
import { Ajv, type ValidateFunction } from 'ajv';
import { DataSource } from 'typeorm';
import { actorOf, type Principal } from '../auth/principal.js';
import { setBounded } from '../common/cache/bounded-map.js';
import { InvalidatingCache } from '../common/cache/invalidating-cache.js';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { EnvelopeCipher } from '../common/crypto/envelope-cipher.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { canonicalCredentials, CREDENTIAL_SCHEMAS, credentialsProblem } from './credential-schemas.js';
import { INTEGRATION_TYPES, IntegrationCredentialEntity, type IntegrationType } from './integration-credential.entity.js';
import { credentialValidationDetail } from './credential-validation-detail.js';
import { rotatingGrantId } from './rotating-grant-id.js';
import { holdActorKey, managerQuery } from '../auth/actor-key-hold.js';
import type { Preconditions } from '../common/http/if-match.js';
import { credentialsLock, LOCK_SQL } from '../db/advisory-locks.js';

export interface CredentialView {
  integrationType: IntegrationType;
  keyId: string;
  fingerprint: string;
  updatedAt: string;
}

/** Associated data: a ciphertext only decrypts for the org and integration it was written for. */
export const credentialAad = (orgId: string, type: string): string => `credentials:${orgId}:${type}`;

/**
 * What a credentials PUT's If-Match / If-None-Match ask of the stored config (RFC 9110 §13.1.1, §13.1.2), the config
 * being the target's representation: `exists` (If-Match: *, "only replace") or `absent` (If-None-Match: *, "only
 * create"); undefined: either, as without a header. Nothing here has an entity tag: an If-Match naming tags cannot
 * hold (412), an If-None-Match naming tags always does. Both `*` cannot hold together (412).
 */
export type CredentialPrecondition = 'exists' | 'absent' | undefined;

export function credentialPrecondition(p: Preconditions | undefined): CredentialPrecondition {
  if (p === undefined) return undefined;
  if (p.ifMatch !== undefined && !('any' in p.ifMatch)) {
    throw new AppError('PRECONDITION_FAILED', 'If-Match names entity tags, and credentials have none (If-Match: * asks that some be stored): nothing was done');
  }
  const exists = p.ifMatch !== undefined;
  const absent = p.ifNoneMatch !== undefined && 'any' in p.ifNoneMatch;
  if (exists && absent) throw new AppError('PRECONDITION_FAILED', 'If-Match: * and If-None-Match: * cannot both hold: nothing was done');
  return exists ? 'exists' : absent ? 'absent' : undefined;
}

const view = (r: IntegrationCredentialEntity): CredentialView => ({
  integrationType: r.integrationType,
  keyId: r.keyId,
  fingerprint: r.fingerprint,
  updatedAt: r.updatedAt.toISOString(),
});

/** Cross-replica staleness bound for cached ciphertext (decryption still happens per use). */
const CACHE_TTL_MS = 1_000;
/**
 * Changes remembered for unchangedSince: the latest ones, far more than a call's lifetime can see (an admin's PUTs
 * and DELETEs); one pushed out is older than every call in flight.
 */
const CHANGES_MAX = 10_000;

@Injectable()
export class CredentialsService {
  private readonly validators: Record<IntegrationType, ValidateFunction>;
  /**
   * `${orgId}:${type}` → the row (ciphertext) or null. A read in flight when a put or remove commits is
   * never cached nor shared with later callers (InvalidatingCache): replaced or deleted credentials are
   * not used again on this replica once the change has been answered.
   */
  private readonly cache = new InvalidatingCache<string, IntegrationCredentialEntity | null>({ ttlMs: CACHE_TTL_MS });
  private readonly changeListeners: ((orgId: string, type: IntegrationType, stamp: string | null | undefined) => void)[] = [];
  /** Counts the changes answered in this process; `${orgId}:${type}` → the count at its latest change. */
  private generation = 0;
  private readonly changes = new Map<string, number>();

  constructor(
    private readonly ds: DataSource,
    private readonly cipher: EnvelopeCipher,
    private readonly events: LedgerEventsService,
    private readonly clock: Clock,
  ) {
    const ajv = new Ajv({ allErrors: false, strict: true });
    this.validators = Object.fromEntries(INTEGRATION_TYPES.map((t) => [t, ajv.compile(CREDENTIAL_SCHEMAS[t])])) as Record<IntegrationType, ValidateFunction>;
  }

  static assertType(type: string): IntegrationType {
    if (!(INTEGRATION_TYPES as readonly string[]).includes(type)) throw new AppError('NOT_FOUND', `unknown integration type (the types are ${INTEGRATION_TYPES.join(', ')})`);
    return type as IntegrationType;
  }

  /** Stores the config, replacing any; `only` (credentialPrecondition): 412 with nothing written unless there was one (`exists`) or none (`absent`). */
  async put(actor: Principal, orgId: string, type: IntegrationType, body: unknown, only?: CredentialPrecondition): Promise<CredentialView> {
    const input = body as { config?: unknown } | undefined;
    if (!input || typeof input !== 'object' || Array.isArray(input) || Object.keys(input).some((k) => k !== 'config')) {
      throw new AppError('VALIDATION_FAILED', 'body must be {"config": {...}}');
    }
    const validate = this.validators[type];
    if (!validate(input.config)) {
      // Names a declared field at most, never a value or an unknown key (either may be a secret).
      throw new AppError('VALIDATION_FAILED', credentialValidationDetail(CREDENTIAL_SCHEMAS[type], validate.errors![0]));
    }
    const problem = credentialsProblem(type, input.config as Record<string, unknown>);
    if (problem) throw new AppError('VALIDATION_FAILED', problem);
    const config = canonicalCredentials(type, input.config as Record<string, unknown>);
    const env = this.cipher.encryptJson(config, credentialAad(orgId, type));
    // Bound to the org and integration: equal configs elsewhere have other fingerprints.
    const fp = this.cipher.fingerprint(config, credentialAad(orgId, type));
    let now = this.clock.now();
    /** The stored row's stamp once committed (undefined: not known to be). */
    let stamp: string | null | undefined;
    try {
      await this.ds.transaction(async (m) => {
        // Every PUT and DELETE of this integration's credentials in turn, and the time taken once this one's turn has
        // come (the database's, as the calls' and events' are): the config stored last carries the latest updatedAt,
        // never one older than the PUT it replaced had answered.
        await m.query(LOCK_SQL, [credentialsLock(orgId, type)]);
        now = this.clock.now();
        const values = [orgId, type, env.keyId, env.iv, env.ciphertext, env.authTag, fp, now];
        const set = `key_id = $3, iv = $4, ciphertext = $5, auth_tag = $6, fingerprint = $7, updated_at = $8`;
        // The precondition is decided by the write itself, so a PUT or DELETE committing meanwhile is seen: the UPDATE
        // waits for it and finds the row or not; the INSERT waits for a concurrent insert and then does nothing.
        const write =
          only === 'exists'
            ? `UPDATE integration_credentials SET ${set} WHERE org_id = $1 AND integration_type = $2 RETURNING 1`
            : `INSERT INTO integration_credentials (org_id, integration_type, key_id, iv, ciphertext, auth_tag, fingerprint, created_at, updated_at)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
               ON CONFLICT (org_id, integration_type) DO ${only === 'absent' ? 'NOTHING' : `UPDATE SET ${set}`} RETURNING 1`;
        // Counted by a SELECT, so every form answers rows alike (TypeORM answers an UPDATE as [rows, count]).
        const [{ n }] = (await m.query(`WITH w AS (${write}) SELECT count(*)::int AS n FROM w`, values)) as [{ n: number }];
        if (n === 0) {
          throw new AppError(
            'PRECONDITION_FAILED',
            only === 'exists'
              ? `If-Match: * holds only when credentials are stored, and none are for ${type}: nothing was written`
              : `If-None-Match: * holds only when no credentials are stored, and some are for ${type}: nothing was written`,
          );
        }
        // The token state of another grant (a replaced refresh token, or none any more) goes with the config it came
        // from: its live rotated refresh token must not outlive it. The same grant (a new clientSecret or apiVersion) keeps it.
        // The row stays, with no state, as the new grant's: a call that loaded the old config before this commit and
        // reaches the token store after it finds another grant's row and stores nothing (a deleted row, it would re-create).
        const grantId = rotatingGrantId(orgId, type, config);
        if (grantId !== null) {
          await m.query(
            `INSERT INTO vendor_tokens AS v (org_id, integration_type, grant_id) VALUES ($1, $2, $3)
             ON CONFLICT (org_id, integration_type) DO UPDATE SET grant_id = EXCLUDED.grant_id, key_id = NULL, iv = NULL, ciphertext = NULL,
               auth_tag = NULL, access_expires_at = NULL, lease_id = NULL, lease_until = NULL, updated_at = now()
               WHERE v.grant_id <> EXCLUDED.grant_id`,
            [orgId, type, grantId],
          );
        }
        // After the upserts, which may have waited for another PUT's rows: a revocation committed meanwhile is read.
        await holdActorKey(managerQuery(m), actor);
        await this.events.append([{ orgId, type: 'credentials.updated', actor: actorOf(actor), metadata: { integrationType: type, keyId: env.keyId, fingerprint: fp } }], m);
      });
      stamp = fp;
    } finally {
      // After the commit (or a failed one, which may have committed), before answering.
      this.changed(orgId, type, stamp);
    }
    return { integrationType: type, keyId: env.keyId, fingerprint: fp, updatedAt: now.toISOString() };
  }

  async list(orgId: string): Promise<CredentialView[]> {
    const rows = await this.ds.getRepository(IntegrationCredentialEntity).find({ where: { orgId }, order: { integrationType: 'ASC' } });
    return rows.map(view);
  }

  async remove(actor: Principal, orgId: string, type: IntegrationType): Promise<void> {
    let stamp: null | undefined;
    try {
      await this.ds.transaction(async (m) => {
        await m.query(LOCK_SQL, [credentialsLock(orgId, type)]);
        const rows = (await m.query('DELETE FROM integration_credentials WHERE org_id = $1 AND integration_type = $2 RETURNING fingerprint', [orgId, type])) as [
          { fingerprint: string }[],
          number,
        ];
        const deleted = rows[0];
        if (!deleted || deleted.length === 0) throw new AppError('NOT_FOUND', 'no credentials for this integration');
        await holdActorKey(managerQuery(m), actor);
        await this.events.append([{ orgId, type: 'credentials.deleted', actor: actorOf(actor), metadata: { integrationType: type, fingerprint: deleted[0].fingerprint } }], m);
      });
      stamp = null;
    } finally {
      this.changed(orgId, type, stamp);
    }
  }

  /**
   * `listener` is told of every put and delete of an org's credentials, once its transaction ended (however), with the
   * stamp (stampOf) the stored row has since: null once deleted, undefined when the change is not known to have committed.
   */
  onChange(listener: (orgId: string, type: IntegrationType, stamp: string | null | undefined) => void): void {
    this.changeListeners.push(listener);
  }

  private changed(orgId: string, type: IntegrationType, stamp: string | null | undefined): void {
    setBounded(this.changes, `${orgId}:${type}`, ++this.generation, CHANGES_MAX);
    this.cache.invalidate(`${orgId}:${type}`);
    for (const listener of this.changeListeners) listener(orgId, type, stamp);
  }

  /** The decrypted config for a vendor call, or null when the org has none. Throws DecryptionError on a bad row. */
  async load(orgId: string, type: IntegrationType): Promise<Record<string, unknown> | null> {
    return (await this.loadStamped(orgId, type))?.config ?? null;
  }

  /**
   * `load`, with the stamp of the stored config it decrypted (see stampOf), for a caller that holds the config
   * across a wait and must find out whether it was replaced or deleted meanwhile; and the generation it was read at
   * (unchangedSince), for a check that must not wait for the database. `fresh`: read from the database, not from this
   * replica's copy (up to CACHE_TTL_MS old: a DELETE or PUT answered by another replica meanwhile is not in it).
   */
  async loadStamped(orgId: string, type: IntegrationType, fresh = false): Promise<{ config: Record<string, unknown>; stamp: string; generation: number } | null> {
    const generation = this.generation; // before the read: a change answered while it runs counts as after it
    const row = await this.row(orgId, type, fresh);
    if (!row) return null;
    return { config: this.cipher.decryptJson<Record<string, unknown>>(row, credentialAad(orgId, type)), stamp: row.fingerprint, generation };
  }

  /**
   * No PUT or DELETE of the org's credentials of `type` answered in this process since `generation` (loadStamped's).
   * Synchronous and local: a change made through another replica is not seen (stampOf sees it). False may also mean a
   * PUT of the same config: the caller confirms with the stamp before it fails a call for it.
   */
  unchangedSince(orgId: string, type: IntegrationType, generation: number): boolean {
    return (this.changes.get(`${orgId}:${type}`) ?? 0) <= generation;
  }

  /**
   * Which config is stored now, without decrypting it: its fingerprint, or null when there is none. Equal stamps
   * mean the same config (a PUT of an identical config keeps it); a replaced one has another. A key rotation
   * recomputes fingerprints too (they are keyed by the active master key), so a stamp taken before it differs after:
   * a caller that finds another stamp compares the decrypted configs before it calls that a change
   * (RuntimeToolExecutor.credentialsState).
   */
  async stampOf(orgId: string, type: IntegrationType, fresh = false): Promise<string | null> {
    return (await this.row(orgId, type, fresh))?.fingerprint ?? null;
  }

  private row(orgId: string, type: IntegrationType, fresh = false): Promise<IntegrationCredentialEntity | null> {
    const read = () => this.ds.getRepository(IntegrationCredentialEntity).findOne({ where: { orgId, integrationType: type } });
    return fresh ? read() : this.cache.get(`${orgId}:${type}`, read);
  }

  /** Rotation and tests: forget cached ciphertext. */
  clearCache(): void {
    this.cache.clear();
  }
}
