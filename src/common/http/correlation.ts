import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

const VALID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Takes X-Correlation-Id from the request when it is sane, else makes one; always echoes it. */
export function correlationMiddleware(req: Request & { correlationId?: string }, res: Response, next: NextFunction): void {
  const given = req.headers['x-correlation-id'];
  const id = typeof given === 'string' && VALID.test(given) ? given : randomUUID();
  req.correlationId = id;
  res.setHeader('X-Correlation-Id', id);
  next();
}
