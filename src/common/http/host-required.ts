import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../errors/app-error.js';
import { sendProblem } from '../errors/problem.filter.js';

/** How many Host fields a request carries: Node keeps only the first in req.headers and drops the others. */
function hostFieldCount(rawHeaders: string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i].toLowerCase() === 'host') count++;
  return count;
}

/**
 * RFC 9112 §3.2: an HTTP/1.1 request must carry exactly one Host field, and a server must answer 400 to one
 * without it or with several (a proxy in front may have read another one than ours). Mounted by configureApp
 * after the correlation id and the request log, so the refusal carries the id and is logged; Node's own check
 * (requireHostHeader, off in createGateway) answers a bare 400 to a missing Host only. rawHeaders holds every
 * field: createGateway lifts Node's cut at 2000 fields (maxHeadersCount).
 */
export function hostRequired(req: Request & { correlationId?: string }, res: Response, next: NextFunction): void {
  const count = hostFieldCount(req.rawHeaders);
  const http11 = req.httpVersionMajor === 1 && req.httpVersionMinor === 1;
  if (count === 1 || (count === 0 && !http11)) return next();
  const detail = count === 0 ? 'an HTTP/1.1 request must carry a Host header' : 'a request must carry one Host header, not several';
  res.setHeader('Connection', 'close');
  sendProblem(res, new AppError('BAD_REQUEST', detail), req.correlationId ?? 'unknown');
}
