import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../errors/app-error.js';
import { sendProblem } from '../errors/problem.filter.js';

const ENCODED_NUL = /%00/;

/**
 * A NUL byte can reach us only percent-encoded (the HTTP parser refuses a raw
 * one), and no id, filter or path segment of this API may contain one:
 * PostgreSQL text cannot hold it, so a filter value with NUL would fail the
 * query (500) instead of matching nothing. Refused here for every route.
 */
export function nulInUrlGuard(req: Request & { correlationId?: string }, res: Response, next: NextFunction): void {
  if (ENCODED_NUL.test(req.url)) return sendProblem(res, new AppError('BAD_REQUEST', 'the URL must not contain NUL (%00)'), req.correlationId ?? 'unknown');
  next();
}
