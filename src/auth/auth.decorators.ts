import { createParamDecorator, SetMetadata, type ExecutionContext } from '@nestjs/common';
import type { Role } from './api-key.entity.js';
import type { Principal } from './principal.js';

export const ROLES_KEY = 'tg:roles';
export const PUBLIC_KEY = 'tg:public';
export const KEY_CHECKED_IN_WRITE = 'tg:key-checked-in-write';
export const RATE_COST_KEY = 'tg:rate-cost';
export const KEY_KIND_KEY = 'tg:key-kind';

/** How many of the key's rate-limit tokens a request spends, read off the parsed request (1 when unset). */
export type RateCostOf = (req: { body?: unknown }) => number;

/** The roles that may call a route. Every /v1 route must carry this (a test enforces it). */
export const Roles = (...roles: Role[]): MethodDecorator & ClassDecorator => SetMetadata(ROLES_KEY, roles);

/** Ops endpoints that need no key (health, metrics, docs). */
export const Public = (): MethodDecorator & ClassDecorator => SetMetadata(PUBLIC_KEY, true);

/**
 * A write route whose own statement re-reads the caller's key and writes nothing for a revoked one
 * (a tool call's intent: the hot path), so the guard may answer it from the key cache. Every other
 * write route looks the key up afresh: a key revoked on another replica changes nothing there.
 */
export const KeyCheckedInWrite = (): MethodDecorator => SetMetadata(KEY_CHECKED_IN_WRITE, true);

/**
 * A route whose one request does the work of several (a batch of tool_uses): it spends that many of the key's
 * rate-limit tokens, so RATE_LIMIT_RPS bounds tool calls, not requests. Read before the role check, like the limit.
 */
export const RateCost = (costOf: RateCostOf): MethodDecorator => SetMetadata(RATE_COST_KEY, costOf);

/**
 * A refusal that depends on the kind of key (a platform key, orgId null, or an org's) rather than its role: the 403
 * detail, or undefined to let the request on. `body` is the request body as our JSON reader parsed it, not yet
 * validated (undefined when there is none, or the reader refused it): a rule reading it must check every field's type.
 */
export type KeyKindRule = (p: Principal, body: unknown) => string | undefined;

/**
 * A key-kind refusal made by the AuthGuard right after the role check, so it answers 403 FORBIDDEN before the body is
 * read or validated (API.md §9: 401 → 403 → the rest), as a wrong role does. The service keeps its own check too.
 */
export const KeyKind = (rule: KeyKindRule): MethodDecorator => SetMetadata(KEY_KIND_KEY, rule);

/** Only a platform key (orgId null) may call the route: an org key gets 403 `detail`. */
export const PlatformKeyOnly = (detail: string): MethodDecorator => KeyKind((p) => (p.orgId !== null ? detail : undefined));

/** Only a key of an org may call the route: a platform key (orgId null), which belongs to no org, gets 403 `detail`. */
export const OrgKeyOnly = (detail: string): MethodDecorator => KeyKind((p) => (p.orgId === null ? detail : undefined));

export const CurrentPrincipal = createParamDecorator((_: unknown, ctx: ExecutionContext): Principal => {
  const req = ctx.switchToHttp().getRequest<{ principal?: Principal }>();
  if (!req.principal) throw new Error('route has no principal: is it missing @Roles?');
  return req.principal;
});
