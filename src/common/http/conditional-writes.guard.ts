import { Injectable, SetMetadata, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Request } from 'express';
import { AppError } from '../errors/app-error.js';
import { parseIfMatch, parseIfNoneMatch } from './if-match.js';

const EVALUATES_IF_MATCH = 'evaluatesIfMatch';

/** On a write route whose handler evaluates If-Match itself against the set's ETag (parseIfMatch, assertIfMatch). */
export const EvaluatesIfMatch = (): MethodDecorator => SetMetadata(EVALUATES_IF_MATCH, true);

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Preconditions a client sends on a write are never dropped (RFC 9110 §13.1: an origin server MUST evaluate If-Match
 * and If-None-Match before performing the method): a client that asked for lost-update protection and got none would
 * undo another admin's change unawares. Only the whole-set PUTs (policies, tool permissions) keep an entity tag a
 * client can hold (no other answer carries an ETag: Express's automatic ones are off), and evaluate If-Match and
 * If-None-Match themselves (assertPreconditions); so does the credentials PUT, whose target may not exist (it creates
 * or replaces: credentialPrecondition). On every other write nothing has a tag an If-Match could name, so
 * one that names tags cannot match: 412 PRECONDITION_FAILED, nothing done (`*`, "if it exists", holds). If-None-Match
 * `*` ("only if nothing is there") is 412 on every write: each targets a resource or collection that exists (elsewhere
 * a list of tags matches none of ours, so it holds). If-Unmodified-Since is ignored: no resource here has a modification
 * date (RFC 9110 §13.1.4). Runs after the AuthGuard: a request refused without its preconditions for its key or role
 * is refused as before; but before the target is looked up, so on those other writes a target that does not exist is
 * 412, not 404, when such a header is sent (RFC 9110 §13.2.1 would have the 404 win: README says so).
 */
@Injectable()
export class ConditionalWritesGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}

  canActivate(ctx: ExecutionContext): boolean {
    if (ctx.getType() !== 'http') return true;
    const req = ctx.switchToHttp().getRequest<Request>();
    if (SAFE.has(req.method)) return true;
    // Those evaluate both headers themselves, once the org is known to be in reach (a 404 comes first).
    if (this.reflector.get<boolean>(EVALUATES_IF_MATCH, ctx.getHandler())) return true;
    const ifNoneMatch = parseIfNoneMatch(req.headers['if-none-match']); // malformed: 400, as If-Match
    if (ifNoneMatch !== undefined && 'any' in ifNoneMatch) {
      throw new AppError('PRECONDITION_FAILED', 'If-None-Match: * holds only where nothing exists, and this write targets something that does: nothing was done');
    }
    const ifMatch = parseIfMatch(req.headers['if-match']); // a malformed one is 400, as on the routes that evaluate it
    if (ifMatch === undefined || 'any' in ifMatch) return true;
    throw new AppError(
      'PRECONDITION_FAILED',
      'If-Match names entity tags, and nothing this route writes has one (only the PUTs of …/policies and …/tool-permissions do): the condition cannot hold, nothing was done',
    );
  }
}
