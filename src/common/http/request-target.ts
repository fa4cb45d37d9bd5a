import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../errors/app-error.js';
import { sendProblem } from '../errors/problem.filter.js';
import { validHostValue } from './host-required.js';

/** `scheme://authority`: an absolute-form request target's head (RFC 9112 §3.2.2). */
const ABSOLUTE_FORM = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)/;
/** A host name's 255 octets (RFC 1123 §2.1; DNS allows 253), a colon and a five-digit port. */
const AUTHORITY_MAX = 261;

/** Requests whose absolute-form target this gateway does not take, with why (refuseBadTarget answers them). */
const refusedTargets = new WeakMap<IncomingMessage, string>();

/**
 * An absolute-form target (`GET http://host/v1/tools`, which a server must accept: RFC 9112 §3.2.2) made origin-form
 * (`/v1/tools`) before anything reads it, as the server 'request' listener that runs first (configureApp) and in
 * checkContinue. The router otherwise parsed it with Node's legacy url.parse, and everything else read it another way:
 * - an authority url.parse refuses (`xn--a`, `a[b`, `[::1]:x`) made the router skip every middleware (no correlation
 *   id, request log, Host check or HTTP/1.0 framing guard: a request pipelined behind such a one was run) and answer
 *   finalhandler's text/html 404;
 * - a host url.parse ends early (`gw.local'x`, `host:abc`) was routed as a path (`/%27x/v1/…`) while the request log
 *   named the path after the authority;
 * - a port that is not digits made Node print the whole target on stderr (DEP0170), user-info and query included,
 *   outside the redacting log.
 * The target's scheme must be http or https and its authority a valid `host[:port]` with a host: user-info (a
 * credential, and a phishing form: RFC 9110 §4.2.4 "treat its presence as an error"), an empty host (RFC 9110 §4.2.1
 * "MUST reject") and anything else are refused 400 by refuseBadTarget, after the request log and the framing checks.
 * The authority is otherwise ignored (RFC 9112 §3.2.2 has it replace Host, which this gateway does not use). Asterisk-
 * and authority-form (`OPTIONS *`, `CONNECT host:443`) are left as they are. An origin-form target costs one look at its
 * first character.
 */
export function toOriginForm(req: IncomingMessage): void {
  const url = req.url;
  if (url === undefined || url.charCodeAt(0) === 0x2f) return;
  const head = ABSOLUTE_FORM.exec(url);
  if (!head) return;
  const [whole, scheme, authority] = head;
  const rest = url.slice(whole.length);
  req.url = rest.startsWith('/') ? rest : `/${rest}`;
  const problem = !/^https?$/i.test(scheme)
    ? 'an absolute-form request target must be an http or https URI'
    : authority.includes('@')
      ? 'the request target must not carry user information (user@host): send the credentials in the Authorization header'
      : authority.length > AUTHORITY_MAX || authority === '' || authority.startsWith(':') || !validHostValue(authority)
        ? "the request target's authority is not a valid host[:port]"
        : undefined;
  if (problem !== undefined) refusedTargets.set(req, problem);
}

/** Why toOriginForm did not take the request's target, if it did not (the target is not echoed: it may carry a credential). */
export function targetRefusal(req: IncomingMessage): string | undefined {
  return refusedTargets.get(req);
}

/** The 400 problem+json for a target toOriginForm did not take. */
export function refuseBadTarget(req: Request & { correlationId?: string }, res: Response, next: NextFunction): void {
  const problem = targetRefusal(req);
  if (problem === undefined) return next();
  sendProblem(res, new AppError('BAD_REQUEST', problem), req.correlationId ?? 'unknown');
}
