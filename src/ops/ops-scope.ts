import type { Principal } from '../auth/principal.js';
import type { OrgScopeService, ScopeOptions } from '../orgs/org-scope.service.js';

/**
 * The org a ledger listing reads: an org key always its own (naming another
 * → 404); a platform key the org it names, or every org (null) when it names none.
 */
export async function listingScope(scope: OrgScopeService, p: Principal, orgId: string | undefined, opts: ScopeOptions = {}): Promise<string | null> {
  if (orgId !== undefined) await scope.assertAccess(p, orgId, opts);
  return p.orgId ?? orgId ?? null;
}

/** Page size when `limit` is absent (API.md §6: 1–200). */
export const DEFAULT_PAGE = 50;

/** The org scope as a cursor binds it. */
export const scopeKey = (orgId: string | null): string => orgId ?? '*';
