/**
 * Transaction-scoped advisory locks, by name: one module, so the statements that take a lock alone and those that take
 * it shared name it alike. A name says what the lock guards ('flag:<org>:<flag>', 'policy:<org>', 'perm:<org>',
 * 'credentials:<org>:<integration>', 'api-key:<key id>'), and PostgreSQL keys the lock by 64 bits of the name's hash
 * (hashtextextended). With hashtext's 32 bits two unrelated names shared a lock once a deployment had some tens of
 * thousands of them (a birthday pair, or one picked on purpose with an org id): since every tool call takes its org's
 * and its key's locks shared, one org's calls then waited behind another org's kill switch, and its kill switch for
 * the other org's calls in flight.
 *
 * Fair turns. A statement that records or claims a call, or writes as an API key, reads the org's flag and policy rows
 * and the key's row FOR SHARE, so that a change of them (an UPDATE) waits for it. Row locks alone let each new FOR SHARE
 * in ahead of an UPDATE already waiting: calls recorded back to back held a kill switch, a block rule or a revocation
 * off for as long as they kept coming, and the change then answered with a time before calls it had let through. So
 * those statements first take the matching lock shared (governanceLocksSharedSql, apiKeyLockSharedSql), and the change
 * takes it alone before its write and its clock read (LOCK_SQL, REVOKE_TURN_SQL): an advisory lock queues a shared
 * request behind a waiting exclusive one, so a change waits only for the statements in flight when it came, and the
 * ones after it wait for it, then read what it wrote.
 */

/** The lock named $1, taken alone until the transaction ends. */
export const LOCK_SQL = 'SELECT pg_advisory_xact_lock(hashtextextended($1, 0))';
/** The lock named $1, taken shared until the transaction ends. */
export const LOCK_SHARED_SQL = 'SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))';

/** Inside a statement: the lock named by the SQL text expression `name`, taken alone / shared. */
const lockSql = (name: string): string => `pg_advisory_xact_lock(hashtextextended(${name}, 0))`;
const lockSharedSql = (name: string): string => `pg_advisory_xact_lock_shared(hashtextextended(${name}, 0))`;

/** The names, from values (ids as the database spells a uuid: lower case, as canonical path ids are) ... */
export const flagLock = (orgId: string, flag: string): string => `flag:${orgId}:${flag}`;
export const policyLock = (orgId: string): string => `policy:${orgId}`;
export const permissionLock = (orgId: string): string => `perm:${orgId}`;
export const credentialsLock = (orgId: string, integration: string): string => `credentials:${orgId}:${integration}`;

/** ... and from SQL uuid expressions, spelling the same names. */
const flagLockSql = (org: string, flag: string): string => `'flag:' || (${org})::text || ':${flag}'`;
const policyLockSql = (org: string): string => `'policy:' || (${org})::text`;
const apiKeyLockSql = (id: string): string => `'api-key:' || (${id})::text`;

/**
 * A SELECT taking the org's tool_calling_enabled and policy locks shared (`org` an SQL uuid expression): a CTE of the
 * statement (volatile, so never inlined), named by the reads of those rows so that the locks come first.
 */
export const governanceLocksSharedSql = (org: string): string =>
  `SELECT ${lockSharedSql(flagLockSql(org, 'tool_calling_enabled'))} AS flag, ${lockSharedSql(policyLockSql(org))} AS policy`;

/** The expression taking an API key's lock shared (`id` an SQL uuid expression), before the key's row is read. */
export const apiKeyLockSharedSql = (id: string): string => lockSharedSql(apiKeyLockSql(id));

/** A revocation's turn: the lock of key $1 alone, after the writes of the key in flight, before any it begins later. */
export const REVOKE_TURN_SQL = `SELECT ${lockSql(apiKeyLockSql('$1::uuid'))}`;
