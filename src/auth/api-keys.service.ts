import { Inject, Injectable, Logger, Optional, type BeforeApplicationShutdown } from '@nestjs/common';
import { ShutdownPhase } from '../common/shutdown-phase.js';
import { DataSource, IsNull } from 'typeorm';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { loggableErrorText } from '../common/errors/loggable-error.js';
import { isUuid, newId, NIL_UUID } from '../common/ids.js';
import { PeriodicTask } from '../common/periodic-task.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import { KeysetQuery } from '../db/keyset-query.js';
import { LedgerEventsService } from '../ledger/ledger-events.service.js';
import { filterHash, LedgerCursorCodec } from '../ops/ledger-cursor.js';
import { OrgScopeService } from '../orgs/org-scope.service.js';
import { ApiKeyEntity, type Role } from './api-key.entity.js';
import { API_KEYS_DEFAULT_PAGE } from './api-keys.dto.js';
import { BOOTSTRAP_KEY_LOCK, ensureBootstrapKey } from './api-keys.bootstrap.js';
import { API_KEYS_CURSOR, LIST_COLUMNS, view, type ApiKeyPage, type ApiKeyRow, type ApiKeyView } from './api-keys.listing.js';
import { generateApiKey, hashApiKey, keyHashDigest, keyPrefix, sameHash } from './api-key-hash.js';
import { actorOf, type Principal } from './principal.js';
import { holdActorKey, managerQuery } from './actor-key-hold.js';
import { REVOKE_TURN_SQL } from '../db/advisory-locks.js';
import { retryOnDeadlock } from '../common/errors/database-errors.js';
import { redactFreeTextWithin } from '../redaction/redaction.service.js';
import { API_KEY_NAME_MAX } from './api-keys.dto.js';

export type { ApiKeyPage, ApiKeyView } from './api-keys.listing.js';

const CACHE_TTL_MS = 5_000;
/** Keys in use, cached; far more than any deployment has. */
const KNOWN_KEYS_MAX = 50_000;
/** Unknown (or revoked) keys remembered for CACHE_TTL_MS: enough to absorb a retry loop, not a map to flood. */
const UNKNOWN_KEYS_MAX = 1_000;
const TOUCH_FLUSH_MS = 30_000;

/** The 403 an org admin key gets asking for a platform key (orgId null). */
export const PLATFORM_KEYS_NEED_PLATFORM_ADMIN = 'only a platform admin can create platform keys';

/**
 * POST /v1/api-keys's key-kind rule (@KeyKind), read off the body before it is validated: an org key asking for a
 * platform key — the body's `orgId` present and exactly null — is refused whatever else the body holds, as create
 * refuses it. Any other orgId (absent, malformed, another org's) is left to validation (400) and org scope (404).
 */
export function platformKeyRefusal(p: Principal, body: unknown): string | undefined {
  if (p.orgId === null || typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  return Object.hasOwn(body, 'orgId') && (body as { orgId?: unknown }).orgId === null ? PLATFORM_KEYS_NEED_PLATFORM_ADMIN : undefined;
}

/** A key found, but revoked: whose it was, for the logs (never the key). */
export type RevokedKey = Pick<Principal, 'keyId' | 'orgId'>;

/** A meter of database lookups that find no key (see authenticate). */
export interface LookupGate {
  /** Spends one lookup: 0 when it may run, else the seconds to wait (nothing spent). */
  take(): number;
  /** The lookup found a live key: its lookup is given back. */
  refund(): void;
}

@Injectable()
export class ApiKeysService implements BeforeApplicationShutdown {
  private readonly log = new Logger('ApiKeys');
  /** hash(hex) → principal; short-lived so a revoke on another replica takes effect within seconds. */
  private readonly cache = new Map<string, { principal: Principal | null; until: number }>();
  /** Keys found unknown or revoked; a revoked one keeps its ids for the request log (revokedKeyOf). */
  private readonly unknownKeys = new Map<string, { principal: Principal | null; until: number; revoked?: RevokedKey }>();
  /**
   * Bumped by every revoke on this replica. A lookup that read its row before
   * a revoke committed may still answer its own request, but must not cache
   * what it read: cached after the revoke's `cache.delete`, the revoked key
   * would be accepted here for another CACHE_TTL_MS.
   */
  private revocations = 0;
  /** Lookups in flight, by revocation count and key hash (see authenticate). */
  private readonly lookups = new Map<string, { startedAt: number; principal: Promise<Principal | null> }>();
  /** Key id → its latest use here (ms since the epoch, on the Clock: the database's time), written at the next flush: the time of the use, not of the flush. */
  private readonly touched = new Map<string, number>();
  private readonly cursors: LedgerCursorCodec;
  private readonly flushes = new PeriodicTask('lastUsedAt flush', TOUCH_FLUSH_MS, () => this.writeLastUsed(), this.log);

  constructor(
    private readonly ds: DataSource,
    private readonly events: LedgerEventsService,
    private readonly orgs: OrgScopeService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clock: Clock,
    @Optional() phase?: ShutdownPhase,
  ) {
    this.flushes.haltOn(phase?.signal);
    // Its own codec (as ApprovalsModule and OpsModule have theirs): the core module does not provide one.
    this.cursors = new LedgerCursorCodec(config);
    this.flushes.start();
  }

  /**
   * Before, not on, application shutdown: Nest destroys the DataSource in
   * TypeORM's own onApplicationShutdown, which runs before this module's, so
   * a flush there always failed and lost up to TOUCH_FLUSH_MS of lastUsedAt.
   */
  async beforeApplicationShutdown(): Promise<void> {
    await this.flushes.stop();
    await this.writeLastUsed().catch((err: unknown) => this.log.warn(`lastUsedAt flush at shutdown failed: ${loggableErrorText(err)}`));
  }

  /**
   * Resolves a presented key; null for unknown or revoked (the caller answers one 401 for both).
   * `gate` meters database lookups that find no key (AuthGuard: per client address): a key the
   * caches know as valid never waits, and once the gate is spent a lookup of any other key is
   * refused before the query.
   * `fresh` skips the caches and any lookup in flight (a write route: see KeyCheckedInWrite).
   */
  async authenticate(presented: string, gate?: LookupGate, fresh = false): Promise<Principal | null> {
    const hash = hashApiKey(presented);
    const cacheKey = hash.toString('hex');
    const now = performance.now();
    const hit = fresh ? undefined : (this.cache.get(cacheKey) ?? this.unknownKeys.get(cacheKey));
    let principal: Principal | null;
    if (hit && hit.until > now) {
      principal = hit.principal;
    } else if (fresh) {
      // Never joins a lookup in flight: one a read began before a revoke committed on another replica would
      // answer this write with what it read then. Nor is it shared, so reads never wait on a write's lookup.
      principal = await this.lookUp(hash, cacheKey, now, this.meter(cacheKey, gate));
    } else {
      // Requests presenting one key at once share one lookup (a burst from a runtime whose key this replica
      // has not seen yet, or a flood of one made-up key): one query, and one unit of the address's budget.
      // Not across a revocation here: a request after it must not get the answer of a lookup begun before. Nor one
      // begun more than CACHE_TTL_MS ago (a stalled connection, a slow database): a revocation on another replica
      // does not reach this counter, and such a lookup may have read the key before it, so joining it would stretch
      // the other replicas' bound past CACHE_TTL_MS, as a cached entry never does.
      const flightKey = `${this.revocations}:${cacheKey}`;
      let flight = this.lookups.get(flightKey);
      if (!flight || now - flight.startedAt > CACHE_TTL_MS) {
        const started = { startedAt: now, principal: this.lookUp(hash, cacheKey, now, this.meter(cacheKey, gate)) };
        void started.principal.finally(() => {
          if (this.lookups.get(flightKey) === started) this.lookups.delete(flightKey);
        }).catch(() => undefined);
        this.lookups.set(flightKey, started);
        flight = started;
      }
      principal = await flight.principal;
    }
    if (principal) this.touch(principal.keyId, this.clock.nowMs());
    return principal;
  }

  /** The ids of a presented key its last lookup here found revoked (within CACHE_TTL_MS), for its 401's request log line. */
  revokedKeyOf(presented: string): RevokedKey | undefined {
    return this.unknownKeys.get(hashApiKey(presented).toString('hex'))?.revoked;
  }

  /**
   * A request let in with a key found revoked afterwards (on another replica; cached as valid here), refused 401
   * by the statement that re-checked the key: it was no use of the key, so its pending use is dropped, else
   * lastUsedAt would land after revokedAt (an earlier use not yet flushed goes with it: lastUsedAt stays older,
   * never later). The key leaves the cache too, so its next request is refused by the guard.
   */
  refused(p: Principal): void {
    this.touched.delete(p.keyId);
    for (const [cacheKey, entry] of this.cache) if (entry.principal?.keyId === p.keyId) this.cache.delete(cacheKey);
    this.revocations++; // a lookup begun before this must not cache the key again
  }

  /**
   * The gate a lookup is metered by, its unit spent now (429 when spent out). A key found valid before (its
   * entry expired, or a write route looks it up afresh) is not metered: only keys no cache knows as valid
   * spend the address's budget, each before its lookup (so lookups sent together cannot all pass), given
   * back when the key is found.
   */
  private meter(cacheKey: string, gate: LookupGate | undefined): LookupGate | undefined {
    const metered = this.cache.has(cacheKey) ? undefined : gate;
    const wait = metered?.take() ?? 0;
    if (wait > 0) throw new AppError('RATE_LIMITED', 'too many requests with unknown API keys from this address', { retryAfterSeconds: wait });
    return metered;
  }

  private async lookUp(hash: Buffer, cacheKey: string, now: number, metered: LookupGate | undefined): Promise<Principal | null> {
    const revocations = this.revocations;
    const row = await this.ds.getRepository(ApiKeyEntity).findOne({ where: { keyHash: hash } });
    const found = row && sameHash(row.keyHash, hash) ? row : null;
    const principal = found && !found.revokedAt ? { keyId: found.id, orgId: found.orgId, role: found.role } : null;
    // A revoked key still in use is what its revocation was for: said, with whose key it was (a made-up key is not),
    // once per lookup: the entry below answers its repeats for CACHE_TTL_MS.
    const revoked = found?.revokedAt ? { keyId: found.id, orgId: found.orgId } : undefined;
    if (revoked) this.log.warn({ ...revoked, revokedAt: found!.revokedAt!.toISOString() }, 'revoked API key used');
    // Unknown keys are remembered apart, in a small map: a flood of made-up keys must not push the keys in
    // use out of the cache (each would go back to the database). Both maps drop their oldest entry when full.
    const into = principal ? this.cache : this.unknownKeys;
    if (into.size >= (principal ? KNOWN_KEYS_MAX : UNKNOWN_KEYS_MAX)) into.delete(into.keys().next().value!);
    if (revocations === this.revocations) into.set(cacheKey, { principal, until: now + CACHE_TTL_MS, ...(revoked ? { revoked } : {}) });
    if (principal) metered?.refund();
    else this.cache.delete(cacheKey); // revoked (on another replica): no longer a key found valid
    return principal;
  }

  async create(actor: Principal, input: { orgId: string | null; role: Role; name: string }): Promise<ApiKeyView & { key: string }> {
    if (input.orgId === null) {
      if (actor.orgId !== null) throw new AppError('FORBIDDEN', PLATFORM_KEYS_NEED_PLATFORM_ADMIN);
      if (input.role !== 'ops' && input.role !== 'admin') {
        throw new AppError('VALIDATION_FAILED', 'role: platform keys (orgId null) must be ops or admin');
      }
    } else {
      await this.orgs.assertAccess(actor, input.orgId);
    }
    const key = generateApiKey();
    const row = this.ds.getRepository(ApiKeyEntity).create({
      id: newId(),
      orgId: input.orgId,
      role: input.role,
      name: redactFreeTextWithin(input.name, API_KEY_NAME_MAX), // kept and shown back: redacted as every such free text is
      keyHash: hashApiKey(key),
      keyPrefix: keyPrefix(key),
      createdBy: actor.keyId,
      createdAt: this.clock.now(),
      revokedAt: null,
      lastUsedAt: null,
    });
    await this.ds.transaction(async (m) => {
      await holdActorKey(managerQuery(m), actor);
      await m.getRepository(ApiKeyEntity).insert(row);
      await this.events.append(
        [{ orgId: input.orgId ?? NIL_UUID, type: 'api_key.created', actor: actorOf(actor), metadata: { apiKeyId: row.id, role: row.role, orgId: row.orgId, keyHashDigest: keyHashDigest(row.keyHash) } }],
        m,
      );
    });
    return { ...view(row), key };
  }

  /**
   * One page of keys, newest first (created_at DESC, id DESC), keyset-paginated
   * like the ledger listings: `nextCursor` is signed and bound to this listing
   * and its scope (an org id, "platform", or "*" for every key), so it cannot be
   * replayed against another org or another listing.
   */
  async list(actor: Principal, q: { orgId?: string; limit?: number; cursor?: string }): Promise<ApiKeyPage> {
    const scope = await this.listScope(actor, q.orgId);
    const limit = q.limit ?? API_KEYS_DEFAULT_PAGE;
    const filters = filterHash({});
    const after = q.cursor === undefined ? undefined : this.cursors.decode(q.cursor, API_KEYS_CURSOR, scope, filters);
    await this.flushLastUsed();
    const query = new KeysetQuery();
    // Every condition binds a value: platform keys are the rows whose org_id is (not distinct from) NULL.
    if (scope === 'platform') query.where((x) => `org_id IS NOT DISTINCT FROM ${x}::uuid`, null);
    else if (scope !== '*') query.where((x) => `org_id = ${x}::uuid`, scope);
    const rows = (await this.ds.query(
      `SELECT ${LIST_COLUMNS} ${query.after(after, 'id', 'uuid').page('api_keys', 'id', limit + 1)}`,
      query.params,
    )) as ApiKeyRow[];
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      items: page.map(view),
      nextCursor: rows.length > limit && last ? this.cursors.encode(API_KEYS_CURSOR, scope, filters, { createdIso: last.created_iso, key: last.id }) : null,
    };
  }

  /** What a listing reads: an org key its own org (naming another → 404); a platform key the org it names, "platform", or every key ("*"). */
  private async listScope(actor: Principal, orgId: string | undefined): Promise<string> {
    if (actor.orgId !== null) {
      if (orgId !== undefined) await this.orgs.assertAccess(actor, orgId);
      return actor.orgId;
    }
    if (orgId === undefined) return '*';
    if (orgId === 'platform') return 'platform';
    await this.orgs.assertAccess(actor, orgId);
    return orgId;
  }

  async revoke(actor: Principal, id: string): Promise<void> {
    if (!isUuid(id)) throw new AppError('NOT_FOUND', 'api key not found');
    const repo = this.ds.getRepository(ApiKeyEntity);
    const row = await repo.findOne({ where: { id } });
    if (!row || (actor.orgId !== null && row.orgId !== actor.orgId)) throw new AppError('NOT_FOUND', 'api key not found');
    if (row.revokedAt) {
      // Revoked already (perhaps on another replica): this replica may still cache it as valid.
      this.forgetKey(row.keyHash);
      return;
    }
    // Two keys revoking each other at once may deadlock on each other's row (each holds its own, holdActorKey):
    // the loser was rolled back whole and tries again, finding its own key revoked (401). The key is forgotten here
    // even if that failed (as the flags', policies' and credentials' caches are): a COMMIT whose answer was lost may
    // have revoked it, and this replica kept accepting it from its cache.
    try {
      await retryOnDeadlock(() =>
        this.ds.transaction(async (m) => {
          if (row.orgId === null && row.role === 'admin') {
            // Never the last platform admin key: nobody could create an org or a key again, and a restart with the
            // same BOOTSTRAP_ADMIN_KEY does not bring a revoked key back. Under the bootstrap lock, so two revokes
            // of the last two keys cannot both pass.
            await m.query('SELECT pg_advisory_xact_lock($1)', [BOOTSTRAP_KEY_LOCK]);
          }
          // After the bootstrap lock: two platform admins revoking each other then take turns instead of deadlocking.
          await holdActorKey(managerQuery(m), actor);
          if (row.orgId === null && row.role === 'admin') {
            const [{ n }] = (await m.query(`SELECT count(*)::int AS n FROM api_keys WHERE org_id IS NULL AND role = 'admin' AND revoked_at IS NULL AND id <> $1`, [id])) as [
              { n: number },
            ];
            if (n === 0) throw new AppError('CONFLICT', 'this is the last platform admin key; create another one before revoking it');
          }
          // Its turn (advisory-locks.ts), and the time taken once it has come: no write of the key is recorded after it.
          await m.query(REVOKE_TURN_SQL, [id]);
          const res = await m.getRepository(ApiKeyEntity).update({ id, revokedAt: IsNull() }, { revokedAt: this.clock.now() });
          if (!res.affected) return;
          await this.events.append(
            [{ orgId: row.orgId ?? NIL_UUID, type: 'api_key.revoked', actor: actorOf(actor), metadata: { apiKeyId: id, role: row.role } }],
            m,
          );
        }),
      );
    } finally {
      this.forgetKey(row.keyHash);
    }
  }

  private forgetKey(keyHash: Buffer): void {
    this.revocations++;
    this.cache.delete(keyHash.toString('hex'));
  }

  /** See ensureBootstrapKey in api-keys.bootstrap.ts. */
  ensureBootstrapKey(): Promise<{ generatedKey?: string }> {
    return ensureBootstrapKey(this.ds, this.events, this.config, this.log, () => this.clock.now());
  }

  private touch(keyId: string, at: number): void {
    const known = this.touched.get(keyId);
    if (known === undefined || at > known) this.touched.set(keyId, at);
  }

  /** A listing's flush: one that fails is logged, and the listing goes on (its uses wait for the next flush). */
  private async flushLastUsed(): Promise<void> {
    await this.writeLastUsed().catch((err: unknown) => this.log.warn(`could not record lastUsedAt: ${loggableErrorText(err)}`));
  }

  /** Writes the uses noted since the last flush; failing, it keeps them for the next one and throws (the periodic flush logs a streak). */
  private async writeLastUsed(): Promise<void> {
    if (this.touched.size === 0) return;
    const uses = [...this.touched];
    this.touched.clear();
    try {
      // GREATEST (which skips NULL): another replica may have written a later use of the same key. SKIP LOCKED: a key
      // held FOR SHARE (a call being recorded, any write of the key: holdActorKey) or being revoked is left for the
      // next flush. Waiting for it instead would hold every other key this statement had already updated, stalling
      // their calls behind it, and could close a deadlock cycle with a write that holds one key and waits for a call.
      // (A key row is never deleted, revoked ones included: one not written was skipped.)
      const ids = uses.map(([id]) => id);
      const written = (await this.ds.query(
        `UPDATE api_keys a SET last_used_at = GREATEST(a.last_used_at, v.t) FROM unnest($1::uuid[], $2::timestamptz[]) v(id, t)
          WHERE a.id = v.id AND a.id IN (SELECT id FROM api_keys WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED)
         RETURNING a.id`,
        [ids, uses.map(([, at]) => new Date(at).toISOString())],
      )) as [{ id: string }[], number];
      const done = new Set(written[0].map((r) => r.id));
      for (const [id, at] of uses) if (!done.has(id)) this.touch(id, at);
    } catch (err) {
      // Kept for the next flush (a database blip must not lose them; new uses of the same keys merge in).
      for (const [id, at] of uses) this.touch(id, at);
      throw err;
    }
  }
}
