import { createParamDecorator, SetMetadata, type ExecutionContext } from '@nestjs/common';
import type { Role } from './api-key.entity.js';
import type { Principal } from './principal.js';

export const ROLES_KEY = 'tg:roles';
export const PUBLIC_KEY = 'tg:public';

/** The roles that may call a route. Every /v1 route must carry this (a test enforces it). */
export const Roles = (...roles: Role[]): MethodDecorator & ClassDecorator => SetMetadata(ROLES_KEY, roles);

/** Ops endpoints that need no key (health, metrics, docs). */
export const Public = (): MethodDecorator & ClassDecorator => SetMetadata(PUBLIC_KEY, true);

export const CurrentPrincipal = createParamDecorator((_: unknown, ctx: ExecutionContext): Principal => {
  const req = ctx.switchToHttp().getRequest<{ principal?: Principal }>();
  if (!req.principal) throw new Error('route has no principal: is it missing @Roles?');
  return req.principal;
});
