import { AppError } from '../common/errors/app-error.js';
import type { Principal } from './principal.js';
import { apiKeyLockSharedSql } from '../db/advisory-locks.js';

/**
 * The acting key, read FOR SHARE: held to the commit of the transaction that reads it. A revocation (an UPDATE of
 * the row) then waits for that write to commit, and a write that reads the row while a revocation is committing
 * waits for it and reads the row as it left it. Either way a write committed after its key's revocation is not.
 * (The guard's fresh lookup happens before the route's transaction: a write that waited on a lock, or was simply
 * slow, could otherwise commit after the 204 of its key's DELETE.) The key's own lock is taken shared first, so a
 * revocation waiting for the writes in flight is not passed by later ones (advisory-locks.ts, "Fair turns"). The intent
 * statement reads its key the same way in a CTE of its own (tool-call-intent.ts).
 */
const ACTOR_KEY_LIVE_SQL = `WITH fair AS (SELECT ${apiKeyLockSharedSql('$1::uuid')} AS k)
  SELECT 1 FROM api_keys, fair WHERE id = $1 AND revoked_at IS NULL FOR SHARE OF api_keys`;

/** Runs a query in the caller's transaction and returns its rows (a TypeORM EntityManager or a pg client adapted). */
export type TxQuery = (text: string, params: unknown[]) => Promise<unknown[]>;

/**
 * In every write transaction a key makes (admin changes, approval decisions, runs, reconciles), after the locks it
 * waits for: 401 when the key is revoked, otherwise the key is held until the commit (ACTOR_KEY_LIVE_SQL). After the
 * waits, so a revocation committed meanwhile is read, and a revocation never waits behind this write's waits.
 */
export async function holdActorKey(query: TxQuery, actor: Pick<Principal, 'keyId'>): Promise<void> {
  const rows = await query(ACTOR_KEY_LIVE_SQL, [actor.keyId]);
  if (rows.length === 0) throw new AppError('UNAUTHENTICATED', 'this API key was revoked');
}

/** holdActorKey's query through a TypeORM EntityManager. */
export const managerQuery =
  (m: { query(text: string, params: unknown[]): Promise<unknown> }): TxQuery =>
  async (text, params) =>
    (await m.query(text, params)) as unknown[];

/** holdActorKey's query through a pg client. */
export const clientQuery =
  (c: { query(text: string, params: unknown[]): Promise<{ rows: unknown[] }> }): TxQuery =>
  async (text, params) =>
    (await c.query(text, params)).rows;
