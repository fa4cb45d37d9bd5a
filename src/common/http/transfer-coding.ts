import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../errors/app-error.js';
import { sendProblem } from '../errors/problem.filter.js';
import { closeAfterAnswer } from './closing-connection.js';

/** The transfer codings of a Transfer-Encoding value other than chunked (Node joins repeated fields with ", "). */
function otherCodings(value: string): string[] {
  return value
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'chunked');
}

/**
 * An HTTP/1.0 request with any Transfer-Encoding has faulty framing (RFC 9112 §6.1: HTTP/1.0 has no transfer coding,
 * so a front end may have framed its body otherwise, and read the rest as another request): refused 400, its
 * connection closed after the answer, and the requests Node already parsed behind it on that connection not run.
 * Only chunked is understood (RFC 9112 §6.1). Node's parser takes "gzip, chunked" (chunked last), undoes the chunking
 * and hands on the gzip bytes as they are: a body the client meant otherwise would be read and acted on. Refused with
 * problem+json before anything reads the body (415, as a Content-Encoding we do not apply: the API has no 501 code),
 * and the connection closes after the answer, its body unread.
 */
export function transferCodingGuard(req: Request & { correlationId?: string }, res: Response, next: NextFunction): void {
  // A request Node parsed after a faulty-framed one on its connection is not run, nor answered (closeAfterAnswer): its
  // bytes were the refused body to a server that framed it otherwise.
  const value = req.headers['transfer-encoding'];
  if (value === undefined) return next();
  if (req.httpVersionMajor === 1 && req.httpVersionMinor === 0) {
    closeAfterAnswer(req, res);
    return sendProblem(res, new AppError('BAD_REQUEST', 'Transfer-Encoding is not allowed in an HTTP/1.0 request: send the body with a Content-Length'), req.correlationId ?? 'unknown');
  }
  if (otherCodings(value).length === 0) return next();
  closeAfterAnswer(req, res);
  sendProblem(res, new AppError('UNSUPPORTED_MEDIA_TYPE', 'Transfer-Encoding other than chunked is not supported: send the body chunked or with a Content-Length'), req.correlationId ?? 'unknown');
}
