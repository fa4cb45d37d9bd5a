import { isIPv6 } from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../errors/app-error.js';
import { sendProblem } from '../errors/problem.filter.js';
import { closeAfterAnswer } from './closing-connection.js';

/** How many Host fields a request carries: Node keeps only the first in req.headers and drops the others. */
function hostFieldCount(rawHeaders: string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i].toLowerCase() === 'host') count++;
  return count;
}

/** RFC 3986 §3.2.2 reg-name (an IPv4 address is one too): unreserved, pct-encoded and sub-delims, possibly empty. */
const REG_NAME = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$/;
/** RFC 3986 §3.2.2 IPvFuture, inside the brackets. */
const IPV_FUTURE = /^v[0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+$/;

/**
 * Whether a Host value is `uri-host [":" port]` (RFC 9112 §3.2, RFC 3986 §3.2.2-3): a reg-name or IPv4 address, or
 * an IPv6 (or IPvFuture) literal in brackets, then an optional port of digits. An empty value is one (an empty
 * reg-name): RFC 9112 allows it for a target without an authority.
 */
export function validHostValue(value: string): boolean {
  let host = value;
  let port = '';
  if (value.startsWith('[')) {
    const close = value.indexOf(']');
    if (close < 0) return false;
    const literal = value.slice(1, close);
    if (!isIPv6(literal) && !IPV_FUTURE.test(literal)) return false;
    host = '';
    port = value.slice(close + 1);
    if (port !== '' && !port.startsWith(':')) return false;
  } else {
    const colon = value.lastIndexOf(':');
    if (colon >= 0) {
      host = value.slice(0, colon);
      port = value.slice(colon);
    }
  }
  return REG_NAME.test(host) && /^(?::[0-9]*)?$/.test(port);
}

/**
 * RFC 9112 §3.2: an HTTP/1.1 request must carry exactly one Host field, and a server must answer 400 to one
 * without it, with several (a proxy in front may have read another one than ours), or with an invalid value (`a, b`: two
 * fields a proxy joined; `x/y`, `a b`, `x:notaport`: no host a client means). Mounted by configureApp
 * after the correlation id and the request log, so the refusal carries the id and is logged; Node's own check
 * (requireHostHeader, off in createGateway) answers a bare 400 to a missing Host only. rawHeaders holds every
 * field: createGateway lifts Node's cut at 2000 fields (maxHeadersCount).
 */
export function hostRequired(req: Request & { correlationId?: string }, res: Response, next: NextFunction): void {
  const count = hostFieldCount(req.rawHeaders);
  const http11 = req.httpVersionMajor === 1 && req.httpVersionMinor === 1;
  const valid = count !== 1 || validHostValue(req.headers.host ?? '');
  if (valid && (count === 1 || (count === 0 && !http11))) return next();
  const detail =
    count === 0 ? 'an HTTP/1.1 request must carry a Host header' : count > 1 ? 'a request must carry one Host header, not several' : 'the Host header is not a valid host[:port]';
  closeAfterAnswer(req, res);
  sendProblem(res, new AppError('BAD_REQUEST', detail), req.correlationId ?? 'unknown');
}
