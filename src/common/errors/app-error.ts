import { ERROR_STATUS, type ErrorCode } from './error-codes.js';

/** The one error type services throw. `detail` is shown to the caller: keep it safe. */
export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly detail?: string,
    readonly extra: { retryAfterSeconds?: number; headers?: Record<string, string>; fields?: Record<string, unknown> } = {},
  ) {
    super(detail ?? code);
    this.name = 'AppError';
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

export const notFound = (what = 'resource'): AppError => new AppError('NOT_FOUND', `${what} not found`);
