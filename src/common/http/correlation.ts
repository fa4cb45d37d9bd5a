import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { holdsCredentialShape } from '../../redaction/credential-shape.js';

/**
 * What a given X-Correlation-Id may be: 1-255 printable ASCII characters
 * without blanks (a UUID, a W3C trace id, "req/123", "svc:checkout#42"). The
 * ops filter `correlationId` accepts exactly these, so every id the gateway
 * echoed can be looked up. Anything else (blanks, non-ASCII, longer) is
 * replaced by a fresh UUID, echoed like any other.
 */
export const CORRELATION_ID = /^[\x21-\x7e]{1,255}$/;

/**
 * Whether a client-chosen request id (X-Correlation-Id, a balancer's X-Request-Id) may be kept: CORRELATION_ID, and
 * no credential's shape (holdsCredentialShape: a bearer value or a vendor token a header template put in the wrong
 * header). A correlation id is logged on every line of its request, stored on ledger rows and shown back as sent,
 * never redacted; one that holds a credential is not taken (as an Idempotency-Key or a tool_use id is refused).
 */
export function saneRequestId(id: unknown): id is string {
  return typeof id === 'string' && CORRELATION_ID.test(id) && !holdsCredentialShape(id);
}

/** The request's X-Correlation-Id when it is sane (saneRequestId), else a fresh one (also for answers given outside Express). */
export function correlationIdOf(req: IncomingMessage): string {
  const given = req.headers['x-correlation-id'];
  return saneRequestId(given) ? given : randomUUID();
}

/** Takes X-Correlation-Id from the request when it is sane, else makes one; always echoes it. */
export function correlationMiddleware(req: Request & { correlationId?: string }, res: Response, next: NextFunction): void {
  const id = correlationIdOf(req);
  req.correlationId = id;
  res.setHeader('X-Correlation-Id', id);
  next();
}
