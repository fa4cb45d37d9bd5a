import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../errors/app-error.js';
import { sendProblem } from '../errors/problem.filter.js';

/** The transfer codings of a Transfer-Encoding value other than chunked (Node joins repeated fields with ", "). */
function otherCodings(value: string): string[] {
  return value
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'chunked');
}

/**
 * Only chunked is understood (RFC 9112 §6.1). Node's parser takes "gzip, chunked" (chunked last), undoes the chunking
 * and hands on the gzip bytes as they are: a body the client meant otherwise would be read and acted on. Refused with
 * problem+json before anything reads the body (415, as a Content-Encoding we do not apply: the API has no 501 code),
 * and the connection closes after the answer, its body unread.
 */
export function transferCodingGuard(req: Request & { correlationId?: string }, res: Response, next: NextFunction): void {
  const value = req.headers['transfer-encoding'];
  if (value === undefined || otherCodings(value).length === 0) return next();
  res.setHeader('Connection', 'close');
  sendProblem(res, new AppError('UNSUPPORTED_MEDIA_TYPE', 'Transfer-Encoding other than chunked is not supported: send the body chunked or with a Content-Length'), req.correlationId ?? 'unknown');
}
