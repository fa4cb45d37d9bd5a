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

/**
 * Says in the served document which roles may call an operation, and what its 403 means. It mirrors the route's
 * @Roles (a test compares the two): a generic "wrong role" would not tell an integrator that, say, an ops key may
 * read an org's configuration. `note` adds why, or what the other roles may do instead.
 */
export function ApiRoles(roles: readonly string[], note?: string): MethodDecorator {
  const list = roles.length === 1 ? roles[0] : `${roles.slice(0, -1).join(', ')} or ${roles[roles.length - 1]}`;
  return applyDecorators(
    ApiOperation({ description: `Roles: ${list}.${note ? ` ${note}` : ''}` }),
    ApiProblemResponse(403, `FORBIDDEN: not ${/^[aeiou]/.test(list) ? 'an' : 'a'} ${list} key`),
  );
}
