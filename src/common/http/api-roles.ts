import { applyDecorators } from '@nestjs/common';
import { ApiOperation } from '@nestjs/swagger';
import { ApiProblemResponse } from './openapi.js';

/**
 * An org's configuration (the org, its flags, tool permissions, policies): ops keys read it, to tell why a call was
 * blocked or approved, but never change it. API.md §2 lists these routes under admin; the OpenAPI document and the
 * README say what ops may do besides.
 */
export const OPS_READS_CONFIG = 'An ops key may read the org’s configuration (to diagnose a call), not change it.';
/** The write routes of that configuration. */
export const ADMIN_CHANGES_CONFIG = 'An ops key may read this configuration, not change it.';
/** The ledger, its events and usage (API.md §6): what ops keys are for; agent and expert keys never read it. */
export const LEDGER_READERS = 'An org key reads its own org; a platform key (orgId null) any org. Agent and expert keys may not read the ledger.';
/** The routes that act in one org (runs, tool calls): a platform key belongs to none and gets 403 (POST /v1/runs: @OrgKeyOnly, before the body). */
export const PLATFORM_KEY_BELONGS_TO_NO_ORG = 'a platform key (orgId null), which belongs to no org';

export interface ApiRolesOptions {
  /** After the roles: why, or what the other roles may do instead. */
  note?: string;
  /**
   * The operation's own summary and description. A method takes one ApiOperation: a second one replaces the
   * first's description and resets its summary, so a route that has its own says it here.
   */
  summary?: string;
  description?: string;
  /** Another cause of the 403 besides the role (e.g. PLATFORM_KEY_BELONGS_TO_NO_ORG), joined to it with ", or ". */
  forbiddenAlso?: string;
  /**
   * The 403 is documented by another decorator (ApiToolCallResponses: it is also a blocked call's body), whose
   * description names the roles with forbiddenText. A second ApiResponse(403) would be merged into it.
   */
  forbiddenDocumentedBy?: 'ApiToolCallResponses';
}

/** "admin", "admin or ops", "expert, admin, ops or agent" (the OpenAPI 403 text, and the AuthGuard's refusal). */
export const listOf = (roles: readonly string[]): string =>
  roles.length === 1 ? roles[0] : `${roles.slice(0, -1).join(', ')} or ${roles[roles.length - 1]}`;

/** The problem+json 403 of a route that these roles may call: "FORBIDDEN: not an admin or ops key[, or …]". */
export function forbiddenText(roles: readonly string[], also?: string): string {
  const list = listOf(roles);
  return `FORBIDDEN: not ${/^[aeiou]/.test(list) ? 'an' : 'a'} ${list} key${also ? `, or ${also}` : ''}`;
}

/**
 * Says in the served document which roles may call an operation, and what its 403 means. It mirrors the route's
 * @Roles (test/foundation/openapi-roles.spec.ts compares the two for every route): a generic "wrong role" would not
 * tell an integrator that, say, an ops key may read an org's configuration. `note` (or options.note) adds why, or
 * what the other roles may do instead.
 */
export function ApiRoles(roles: readonly string[], noteOrOptions?: string | ApiRolesOptions): MethodDecorator {
  const o: ApiRolesOptions = typeof noteOrOptions === 'string' ? { note: noteOrOptions } : (noteOrOptions ?? {});
  const description = [`Roles: ${listOf(roles)}.${o.note ? ` ${o.note}` : ''}`, o.description].filter(Boolean).join('\n\n');
  // summary: undefined, not absent: ApiOperation defaults it to '', which the document would show as an empty summary.
  const decorators = [ApiOperation({ summary: o.summary, description })];
  if (!o.forbiddenDocumentedBy) decorators.push(ApiProblemResponse(403, forbiddenText(roles, o.forbiddenAlso)));
  return applyDecorators(...decorators);
}
