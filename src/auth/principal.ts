import type { Role } from './api-key.entity.js';

/** Who is calling: resolved from the API key by the AuthGuard. */
export interface Principal {
  keyId: string;
  orgId: string | null;
  role: Role;
  /** Acting for one tool_use of a batch the guard let in (its rate-limit tokens spent for every item at once). */
  batchItem?: true;
  /** The request's X-Correlation-Id as echoed (AuthGuard): kept on the admin events it causes (actorOf). */
  correlationId?: string;
}

/**
 * What the request log reads of the key a request authenticated with (AuthGuard): ids only, never the key. Set also
 * when the key is then refused (429, 403).
 */
export interface AuthenticatedRequest {
  authenticatedKey?: Pick<Principal, 'keyId' | 'orgId'> & { revoked?: true };
}

/**
 * The actor of an event a key's request causes (an admin change, a run ended): the key, its role, and the request's
 * correlation id, which ties the event to the request's log line and to the caller's own trace.
 */
export const actorOf = (p: Principal): { keyId: string; role: Role; correlationId?: string } =>
  p.correlationId === undefined ? { keyId: p.keyId, role: p.role } : { keyId: p.keyId, role: p.role, correlationId: p.correlationId };

/** What reachesRun needs of a principal (the actor a call path carries, whose role is kept as text, will do). */
export type RunReacher = Pick<Principal, 'keyId' | 'orgId'> & { role: string };

/**
 * The one key whose runs `p` reaches within its org: an `agent` key reaches only the runs it started (API.md §1
 * "its runs", "its own tool calls and results"), every other role every run of its org
 * (admin keys act on all of them; ops/expert read as their role allows). null: no such restriction.
 */
const runOwnerScope = (p: RunReacher): string | null => (p.role === 'agent' ? p.keyId : null);

/**
 * Whether `p` reaches a run — and so its tool calls and results — of org `orgId` started by key `createdBy`.
 * Every route that names a run, or a call of one, asks this: a run it does not reach answers exactly as a
 * missing one does (404 with the route's code), another org's as today, and another agent key's of the same org alike
 * (a replaced agent key included: the run belongs to the key that started it, not to whoever holds the role now).
 * Approvals are not asked: any agent key of the org relays the client's decisions (API.md §9, ApprovalsService).
 */
export function reachesRun(p: RunReacher, run: { orgId: string; createdBy: string | null }): boolean {
  if (p.orgId !== null && run.orgId !== p.orgId) return false;
  const owner = runOwnerScope(p);
  return owner === null || run.createdBy === owner;
}
