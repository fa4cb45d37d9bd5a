import { Inject, Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { Clock } from '../common/clock.js';
import { AppError } from '../common/errors/app-error.js';
import { listOf } from '../common/http/api-roles.js';
import { bodyErrorOf } from '../common/http/json-body.js';
import { declaresQuery, refuseQueryParameters } from '../common/http/no-query-parameters.js';
import { APP_CONFIG, type AppConfig } from '../config/app-config.js';
import type { Role } from './api-key.entity.js';
import { ApiKeysService, type LookupGate } from './api-keys.service.js';
import { KEY_CHECKED_IN_WRITE, KEY_KIND_KEY, PUBLIC_KEY, RATE_COST_KEY, ROLES_KEY, type KeyKindRule, type RateCostOf } from './auth.decorators.js';
import { clientAddressOf } from './client-address.js';
import type { AuthenticatedRequest, Principal } from './principal.js';
import { KeyRateLimiter } from './key-rate-limiter.js';
import { RateLimiter } from './rate-limiter.js';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Global guard. Order of checks (API.md §9): more than one Authorization header (400) → authenticate (401) → rate limit
 * (429) → role (403) → the key's kind, platform or org (403, @KeyKind) → a body the reader refused (415, 400) → a
 * query parameter on a route that declares none (400); the
 * ValidationPipe (400) runs after the guard, and org scope (404) is checked by the services. A route with neither
 * @Roles nor @Public is refused: forgetting the decorator fails closed. Before authentication, an
 * address whose made-up keys are over AUTH_FAILURE_RPS gets 429 for any key
 * the caches do not know, without the database being asked.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  /** Lookups that found no key, per client address: a flood of made-up keys is refused before it reaches the database. */
  private readonly failures: RateLimiter | null;

  constructor(
    private readonly reflector: Reflector,
    private readonly keys: ApiKeysService,
    private readonly limiter: KeyRateLimiter,
    @Inject(APP_CONFIG) config: AppConfig,
    clock: Clock,
  ) {
    this.failures = config.AUTH_FAILURE_RPS > 0 ? new RateLimiter(config.AUTH_FAILURE_RPS, () => clock.elapsedMs()) : null;
  }

  async canActivate(ctx: ExecutionContext): Promise<boolean> {
    const targets = [ctx.getHandler(), ctx.getClass()];
    const req = ctx.switchToHttp().getRequest<Request & { principal?: Principal; correlationId?: string } & AuthenticatedRequest>();
    if (this.reflector.getAllAndOverride<boolean>(PUBLIC_KEY, targets)) return this.bodyChecked(req);
    // Node keeps the first of repeated fields in req.headers; a proxy or audit log in front may read another one.
    // Authorization is no list (RFC 9110 §5.3): two are refused before either is looked up, as a repeated Host is.
    if ((req.headersDistinct.authorization?.length ?? 0) > 1) throw new AppError('BAD_REQUEST', 'send one Authorization header, not several');
    const header = req.headers.authorization;
    // The scheme is case-insensitive (RFC 9110 §11.1): "bearer" and "BEARER" are Bearer.
    const match = typeof header === 'string' ? /^Bearer ([\x21-\x7e]{1,512})$/i.exec(header) : null;
    // Reads may be answered from the key cache (a revocation reaches other replicas within its 5 s); a
    // write looks the key up afresh unless its own statement re-checks it (KeyCheckedInWrite).
    const fresh = !SAFE_METHODS.has(req.method) && !this.reflector.getAllAndOverride<boolean>(KEY_CHECKED_IN_WRITE, targets);
    const principal = match ? await this.keys.authenticate(match[1], this.lookupGate(req), fresh) : null;
    if (!principal) {
      // A revoked key's 401 line names whose key it was (a SIEM alerts on it); a made-up key's names none.
      const revoked = match ? this.keys.revokedKeyOf(match[1]) : undefined;
      if (revoked) req.authenticatedKey = { ...revoked, revoked: true };
      // Says what is wrong with the header's form (never echoing it); a well-formed key that is no live key is not told apart.
      const form =
        typeof header !== 'string' || header === ''
          ? ': send it as Authorization: Bearer <key>'
          : !/^Bearer /i.test(header)
            ? ' (the Authorization header must be "Bearer <key>")'
            : match === null
              ? ' (the key after "Bearer " must be 1-512 printable ASCII characters, no blanks)'
              : '';
      throw new AppError('UNAUTHENTICATED', `a valid API key is required${form}`);
    }
    // For the request log, also when a check below refuses the key (its 429 names whom to revoke); req.principal is
    // set only once every check has passed.
    req.authenticatedKey = { keyId: principal.keyId, orgId: principal.orgId };
    const costOf = this.reflector.get<RateCostOf | undefined>(RATE_COST_KEY, ctx.getHandler());
    const wait = this.limiter.take(principal.keyId, costOf ? costOf(req) : 1);
    if (wait > 0) throw new AppError('RATE_LIMITED', 'rate limit exceeded for this API key', { retryAfterSeconds: wait });
    const roles = this.reflector.getAllAndOverride<Role[] | undefined>(ROLES_KEY, targets);
    if (!roles || !roles.includes(principal.role)) throw new AppError('FORBIDDEN', roleRefusal(principal.role, roles));
    // A key of the wrong kind is refused like a wrong role: before the body is looked at (the ValidationPipe runs later).
    const refusal = this.reflector.get<KeyKindRule | undefined>(KEY_KIND_KEY, ctx.getHandler())?.(principal, req.body);
    if (refusal !== undefined) throw new AppError('FORBIDDEN', refusal);
    // The cached principal is shared by the key's requests: this request's correlation id goes on a copy.
    req.principal = req.correlationId === undefined ? principal : { ...principal, correlationId: req.correlationId };
    this.bodyChecked(req);
    // A query string on a route that declares none (400): a parameter the route would ignore is refused, as an
    // unknown one is where the ValidationPipe judges a query DTO. The unauthenticated probes (/healthz, …) take any.
    if (!declaresQuery(ctx.getClass(), ctx.getHandler())) refuseQueryParameters(req.query);
    return true;
  }

  private lookupGate(req: Request): LookupGate | undefined {
    const failures = this.failures;
    if (!failures) return undefined;
    const address = clientAddressOf(req);
    return { take: () => failures.take(address), refund: () => failures.refund(address) };
  }

  /** A body the reader refused (415, 400) is answered only now, after 401 / 429 / 403. */
  private bodyChecked(req: Request): true {
    const bodyError = bodyErrorOf(req);
    if (bodyError) throw bodyError;
    return true;
  }
}

/**
 * The wrong-role refusal, naming the key's role and the ones the route takes (what the OpenAPI document says of it
 * too): a caller holding an ops key where an admin one is needed learns which key to use, not only that this one fails.
 */
export function roleRefusal(role: Role, roles: readonly Role[] | undefined): string {
  if (!roles || roles.length === 0) return `this API key (role ${role}) may not call this route: no API key may`;
  return `this API key (role ${role}) may not call this route: it takes ${listOf(roles)} keys`;
}
