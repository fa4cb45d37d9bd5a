import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';

/**
 * What a given X-Correlation-Id may be: 1-255 printable ASCII characters
 * without blanks (a UUID, a W3C trace id, "req/123", "svc:checkout#42"). The
 * ops filter `correlationId` accepts exactly these, so every id the gateway
 * echoed can be looked up. Anything else (blanks, non-ASCII, longer) is
 * replaced by a fresh UUID, echoed like any other.
 */
export const CORRELATION_ID = /^[\x21-\x7e]{1,255}$/;

/** The request's X-Correlation-Id when it is sane, else a fresh one (also for answers given outside Express). */
export function correlationIdOf(req: IncomingMessage): string {
  const given = req.headers['x-correlation-id'];
  return typeof given === 'string' && CORRELATION_ID.test(given) ? given : randomUUID();
}

/** Takes X-Correlation-Id from the request when it is sane, else makes one; always echoes it. */
export function correlationMiddleware(req: Request & { correlationId?: string }, res: Response, next: NextFunction): void {
  const id = correlationIdOf(req);
  req.correlationId = id;
  res.setHeader('X-Correlation-Id', id);
  next();
}
