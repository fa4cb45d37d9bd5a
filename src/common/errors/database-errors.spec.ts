import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable, isDeadlock, retryOnDeadlock } from './database-errors.js';

/** The shape node-postgres gives a server error, optionally wrapped the way TypeORM wraps it. */
const pgError = (code: string, message = 'x') => Object.assign(new Error(message), { code });
const wrapped = (driverError: unknown) => Object.assign(new Error('QueryFailedError'), { driverError });

describe('isDatabaseUnavailable', () => {
  it('is true for "retry later": lost connections, cancelled statements, lock timeouts, exhausted servers, serialization failures', () => {
    for (const code of ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', '57P01', '57014', '55P03', '53300', '53100', '08006', '25006', '25P03', '40001']) {
      expect(isDatabaseUnavailable(pgError(code)), code).toBe(true);
      expect(isDatabaseUnavailable(wrapped(pgError(code))), `wrapped ${code}`).toBe(true);
    }
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Client was closed and is not queryable'))).toBe(true);
    expect(isDatabaseUnavailable(wrapped(new Error('canceling statement due to statement timeout')))).toBe(false); // no code: not guessed from text
  });

  it('is false for errors in the request or the code: constraints, syntax, bad input values', () => {
    for (const code of ['23505', '23503', '42601', '42P01', '22P02', '22008', 'ERR_SOMETHING']) {
      expect(isDatabaseUnavailable(pgError(code)), code).toBe(false);
      expect(isDatabaseUnavailable(wrapped(pgError(code))), `wrapped ${code}`).toBe(false);
    }
    expect(isDatabaseUnavailable(undefined)).toBe(false);
    expect(isDatabaseUnavailable('57014')).toBe(false);
  });
});

describe('retryOnDeadlock', () => {
  it('runs the work again after a deadlock (40P01, wrapped or not), up to the attempts given, then throws it', async () => {
    expect(isDeadlock(wrapped(pgError('40P01')))).toBe(true);
    expect(isDeadlock(pgError('40001'))).toBe(false);
    let calls = 0;
    expect(await retryOnDeadlock(async () => (++calls < 3 ? Promise.reject(wrapped(pgError('40P01'))) : 'done'))).toBe('done');
    expect(calls).toBe(3);
    calls = 0;
    await expect(retryOnDeadlock(async () => (++calls, Promise.reject(pgError('40P01'))), 2)).rejects.toMatchObject({ code: '40P01' });
    expect(calls).toBe(2);
  });

  it('never repeats work that failed any other way', async () => {
    let calls = 0;
    await expect(retryOnDeadlock(async () => (++calls, Promise.reject(pgError('23505'))))).rejects.toMatchObject({ code: '23505' });
    expect(calls).toBe(1);
  });
});
