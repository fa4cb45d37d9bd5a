/**
 * Transaction-scoped advisory locks, by name: one module, so the statements that take a lock alone and those that take
 * it shared name it alike. A name says what the lock guards ('flag:<org>:<flag>', 'policy:<org>', 'perm:<org>',
 * 'credentials:<org>:<integration>', 'api-key:<key id>'), and PostgreSQL keys the lock by 64 bits of the name's hash
 * (hashtextextended). With hashtext's 32 bits two unrelated names shared a lock once a deployment had some tens of
 * thousands of them (a birthday pair, or one picked on purpose with an org id): since every tool call takes its org's
 * and its key's locks shared, one org's calls then waited behind another org's kill switch, and its kill switch for
 * the other org's calls in flight.
 */

/** The lock named $1, taken alone until the transaction ends. */
export const LOCK_SQL = 'SELECT pg_advisory_xact_lock(hashtextextended($1, 0))';
/** The lock named $1, taken shared until the transaction ends. */
export const LOCK_SHARED_SQL = 'SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))';

/** Inside a statement: the lock named by the SQL text expression `name`, taken alone / shared. */
export const lockSql = (name: string): string => `pg_advisory_xact_lock(hashtextextended(${name}, 0))`;
export const lockSharedSql = (name: string): string => `pg_advisory_xact_lock_shared(hashtextextended(${name}, 0))`;

/** The names, from values (ids as the database spells a uuid: lower case, as canonical path ids are) ... */
export const flagLock = (orgId: string, flag: string): string => `flag:${orgId}:${flag}`;
export const policyLock = (orgId: string): string => `policy:${orgId}`;
export const permissionLock = (orgId: string): string => `perm:${orgId}`;
export const credentialsLock = (orgId: string, integration: string): string => `credentials:${orgId}:${integration}`;

/** ... and from SQL uuid expressions, spelling the same names. */
export const flagLockSql = (org: string, flag: string): string => `'flag:' || (${org})::text || ':${flag}'`;
export const policyLockSql = (org: string): string => `'policy:' || (${org})::text`;
export const apiKeyLockSql = (id: string): string => `'api-key:' || (${id})::text`;
