import { Catch, HttpException, Logger, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import type { Request, Response } from 'express';
import { AppError } from './app-error.js';
import { rememberDatabaseCause, rememberProblemCode } from './answered-problem.js';
import { toolUseIdOf, withToolResult } from './problem-tool-result.js';
import { ERROR_STATUS, ERROR_TITLES, type ErrorCode } from './error-codes.js';
import { databaseCause, isDatabaseUnavailable } from './database-errors.js';
import { loggableErrorWithStack } from './loggable-error.js';
import { rememberToolCall } from '../../logging/answered-call.js';

const HTTP_FALLBACK: Record<number, ErrorCode> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHENTICATED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  409: 'CONFLICT',
  412: 'PRECONDITION_FAILED',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  422: 'INVALID_INPUT',
  429: 'RATE_LIMITED',
};

/** Turns any error into the matching AppError; unknown errors become INTERNAL. */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof HttpException) {
    const status = err.getStatus();
    const code = HTTP_FALLBACK[status];
    if (code) return new AppError(code, status === 404 ? 'no such route' : ERROR_TITLES[code]);
    // Another client error a framework or middleware raised (416, 405…): the client's, never a 500.
    if (status >= 400 && status < 500) return new AppError('BAD_REQUEST', `the request was refused (HTTP ${status})`);
  }
  if (isDatabaseUnavailable(err)) return new AppError('DATABASE_UNAVAILABLE', 'the database is unavailable; retry later', { retryAfterSeconds: 1 });
  return new AppError('INTERNAL', 'an internal error occurred');
}

export function problemBody(e: AppError, correlationId: string): Record<string, unknown> {
  return {
    type: `https://tool-gateway.dev/problems/${e.code.toLowerCase().replace(/_/g, '-')}`,
    title: ERROR_TITLES[e.code],
    status: ERROR_STATUS[e.code],
    detail: e.detail ?? ERROR_TITLES[e.code],
    code: e.code,
    correlationId,
    ...(e.extra.retryAfterSeconds !== undefined ? { retryAfterSeconds: e.extra.retryAfterSeconds } : {}),
    // Every VALIDATION_FAILED has `errors` (the Problem schema): a check that finds one problem gives its detail.
    ...(e.code === 'VALIDATION_FAILED' ? { errors: [e.detail ?? ERROR_TITLES[e.code]] } : {}),
    ...(e.extra.fields ?? {}),
  };
}

export function sendProblem(res: Response, e: AppError, correlationId: string): void {
  if (e.extra.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(e.extra.retryAfterSeconds));
  // RFC 9110 §15.5.2: a 401 names the scheme it wants (RFC 6750 §3: Bearer).
  if (ERROR_STATUS[e.code] === 401) res.setHeader('WWW-Authenticate', 'Bearer realm="tool-gateway"');
  for (const [k, v] of Object.entries(e.extra.headers ?? {})) res.setHeader(k, v);
  // Written without res.send: Express would tag the problem document with an ETag of its own (W/"1b5-…"), which a
  // client keeping "the ETag of the last PUT" for its next If-Match would send and be refused 412 for. An answer's
  // ETag is the set's (GET, PUT, and a 412's current one), or none.
  // A problem answered to a tool_use (the route remembered its id) carries the model's tool_result for it.
  const body = JSON.stringify(problemBody(withToolResult(e, toolUseIdOf(res)), correlationId));
  rememberProblemCode(res, e.code);
  // A problem naming a tool call (IDEMPOTENCY_IN_PROGRESS, IDEMPOTENCY_KEY_REUSED for another run, a 503 after it ran): its line names it too.
  const toolCallId = e.extra.fields?.toolCallId;
  if (typeof toolCallId === 'string') rememberToolCall(res, { toolCallId });
  res.status(ERROR_STATUS[e.code]);
  res.setHeader('Content-Type', 'application/problem+json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end((res.req as Response['req'] | undefined)?.method === 'HEAD' ? undefined : body);
}

/** The one exception filter: every error answers problem+json with a code and the correlation id. */
@Catch()
export class ProblemFilter implements ExceptionFilter {
  private readonly log = new Logger('Errors');

  catch(err: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<Request & { correlationId?: string }>();
    const res = ctx.getResponse<Response>();
    const correlationId = req.correlationId ?? 'unknown';
    const e = toAppError(err);
    if (e.code === 'INTERNAL' && !(err instanceof AppError)) {
      // The stack goes to the log (with the correlation id), never to the caller; its message redacted, as any logged error's.
      // (An INTERNAL AppError was made on purpose by code that logged its cause: the outcome recorder's.)
      this.log.error({ correlationId, err: loggableErrorWithStack(err) }, 'unhandled error');
    } else if (e.code === 'DATABASE_UNAVAILABLE') {
      // Its code and our phrase for it tell a lock or a full pool from an outage (/readyz can be green meanwhile):
      // on the answer's own request line (databaseCode, databaseCause), not a second line per answer.
      const cause = databaseCause(err);
      if (cause) rememberDatabaseCause(res, cause);
    }
    if (res.headersSent) {
      res.end();
      return;
    }
    sendProblem(res, e, correlationId);
  }
}
