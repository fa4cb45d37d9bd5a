import type { Logger } from '@nestjs/common';
import { IsNull, type DataSource, type EntityManager } from 'typeorm';
import { newId, NIL_UUID } from '../common/ids.js';
import { REVOKE_TURN_SQL } from '../db/advisory-locks.js';
import type { AppConfig } from '../config/app-config.js';
import type { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { ApiKeyEntity } from './api-key.entity.js';
import { generateApiKey, hashApiKey, keyHashDigest, keyPrefix } from './api-key-hash.js';

/** Serialises ensureBootstrapKey across replicas (any constant distinct from bootstrap.ts's MIGRATION_LOCK). */
export const BOOTSTRAP_KEY_LOCK = 7_413_920_553;
const BOOTSTRAP_NAME = 'bootstrap admin (BOOTSTRAP_ADMIN_KEY)';
const GENERATED_NAME = 'bootstrap admin (generated)';

/**
 * Makes sure the platform admin key exists. With BOOTSTRAP_ADMIN_KEY set, that
 * key (by hash); without it outside production, a generated key returned once
 * so start-up can print it.
 *
 * Race-free when several replicas start together on one database: the check
 * and the insert run in one transaction under a transaction-scoped advisory
 * lock, so exactly one replica inserts (and, for the generated key, exactly
 * one generates and prints it); the configured key's insert is also
 * ON CONFLICT DO NOTHING, so even a replica that does not take the lock
 * (an older version during a rolling deploy) cannot make it fail.
 */
export async function ensureBootstrapKey(
  ds: DataSource,
  events: LedgerEventsService,
  config: AppConfig,
  log: Logger,
  now: () => Date,
): Promise<{ generatedKey?: string }> {
  const configured = config.BOOTSTRAP_ADMIN_KEY;
  if (!configured && config.NODE_ENV === 'production') {
    // Production generates no key (it would be printed to a log); a new install without one would run with nobody
    // able to create an org or a key, and say nothing.
    const [{ exists }] = (await ds.query(
      `SELECT EXISTS (SELECT 1 FROM api_keys WHERE org_id IS NULL AND role = 'admin' AND revoked_at IS NULL) AS exists`,
    )) as [{ exists: boolean }];
    if (!exists) {
      log.warn('no platform admin key exists and BOOTSTRAP_ADMIN_KEY is not set (NODE_ENV=production): nobody can create orgs or API keys; set BOOTSTRAP_ADMIN_KEY and restart');
    }
    return {};
  }
  return ds.transaction(async (m) => {
    await m.query('SELECT pg_advisory_xact_lock($1)', [BOOTSTRAP_KEY_LOCK]);
    const repo = m.getRepository(ApiKeyEntity);
    const row = (name: string, key: string) => ({
      id: newId(), orgId: null, role: 'admin' as const, name, keyHash: hashApiKey(key),
      keyPrefix: keyPrefix(key), createdBy: null, createdAt: now(), revokedAt: null, lastUsedAt: null,
    });
    if (configured) {
      const configuredRow = row(BOOTSTRAP_NAME, configured);
      const inserted = await repo.createQueryBuilder().insert().into(ApiKeyEntity).values(configuredRow).orIgnore().returning('id').execute();
      // Only the start-up that adds the row records it: a restart with the same key adds neither row nor event.
      if ((inserted.raw as unknown[]).length > 0) await appendCreated(events, m, configuredRow.id, configuredRow.keyHash);
      // Also rewrites the listed prefix of a row stored when it was the first characters of any configured key.
      // Only a platform admin key's: another key's row is left as it is.
      const [updated] = (await m.query(
        `UPDATE api_keys SET key_prefix = $2 WHERE key_hash = $1 AND org_id IS NULL AND role = 'admin' RETURNING revoked_at`,
        [configuredRow.keyHash, configuredRow.keyPrefix],
      )) as [{ revoked_at: Date | null }[], number];
      if (updated.length === 0) {
        // The insert found the hash taken by a key that is not a platform admin key (an org key, a platform ops
        // key: the wrong key pasted). It grants no admin rights, so revoking the earlier admin keys would leave none.
        log.error('BOOTSTRAP_ADMIN_KEY is the text of an existing key that is not a platform admin key; not used, and no other key was revoked; set a new BOOTSTRAP_ADMIN_KEY and restart');
        return {};
      }
      if (updated[0].revoked_at) {
        // A value revoked since (replaced by a newer BOOTSTRAP_ADMIN_KEY, or by an admin): an old replica
        // restarting in a rolling deploy, or a rollback. Revoking the newer key too would leave none.
        log.error('BOOTSTRAP_ADMIN_KEY names a key that has been revoked: it does not authenticate, and no other key was revoked; set a new BOOTSTRAP_ADMIN_KEY and restart');
        return {};
      }
      // A changed BOOTSTRAP_ADMIN_KEY replaces the earlier one (e.g. after a leak): the old
      // platform key stops working instead of staying valid beside the new one. So does a key
      // generated before one was configured (it was printed to a log).
      const retiring = (await m.query(
        // created_by IS NULL: only keys this start-up made; a platform admin may name a key of theirs the same.
        `SELECT id FROM api_keys
          WHERE name IN ($1, $3) AND org_id IS NULL AND created_by IS NULL AND revoked_at IS NULL AND key_hash <> $2 ORDER BY id`,
        [BOOTSTRAP_NAME, configuredRow.keyHash, GENERATED_NAME],
      )) as { id: string }[];
      if (retiring.length === 0) return {};
      // Each key's revocation turn, as an admin's revocation takes it (advisory-locks.ts): after the writes of the key
      // in flight, before any it begins later; the time taken once the turns have come, so no write of the key is
      // recorded after its revokedAt.
      for (const { id } of retiring) await m.query(REVOKE_TURN_SQL, [id]);
      const replaced = (await m.query(`UPDATE api_keys SET revoked_at = $2 WHERE id = ANY($1::uuid[]) AND revoked_at IS NULL RETURNING id, name`, [
        retiring.map((r) => r.id),
        now(),
      ])) as [{ id: string; name: string }[], number];
      const rows = replaced[0];
      if (rows.length > 0) {
        const reasonOf = (name: string) => (name === GENERATED_NAME ? 'BOOTSTRAP_ADMIN_KEY set' : 'BOOTSTRAP_ADMIN_KEY changed');
        await events.append(
          rows.map(({ id: apiKeyId, name }) => ({ orgId: NIL_UUID, type: 'api_key.revoked', metadata: { apiKeyId, role: 'admin', reason: reasonOf(name) } })),
          m,
        );
        log.warn(`BOOTSTRAP_ADMIN_KEY changed or set: revoked ${rows.length} earlier bootstrap admin key(s)`);
      }
      return {};
    }
    // Only while no platform admin key is live: one made with the generated key (which an admin then revoked, as it
    // was printed and saved) keeps it revoked, instead of the next start minting and printing another.
    if (await repo.exists({ where: { orgId: IsNull(), role: 'admin', revokedAt: IsNull() } })) return {};
    const key = generateApiKey();
    const generatedRow = row(GENERATED_NAME, key);
    await repo.insert(generatedRow);
    await appendCreated(events, m, generatedRow.id, generatedRow.keyHash);
    return { generatedKey: key };
  });
}

/** The api_key.created event the API writes for every other key; no actor, as no key made this one. */
function appendCreated(events: LedgerEventsService, m: EntityManager, apiKeyId: string, keyHash: Buffer): Promise<void> {
  return events.append([{ orgId: NIL_UUID, type: 'api_key.created', metadata: { apiKeyId, role: 'admin', orgId: null, keyHashDigest: keyHashDigest(keyHash) } }], m);
}
