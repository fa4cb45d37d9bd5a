import { describe, expect, it } from 'vitest';
import { databaseCause, failedStatementFields, isDatabaseUnavailable, isDeadlock, retryOnDeadlock } from './database-errors.js';

/** The shape node-postgres gives a server error, optionally wrapped the way TypeORM wraps it. */
const pgError = (code: string, message = 'x') => Object.assign(new Error(message), { code });
const wrapped = (driverError: unknown) => Object.assign(new Error('QueryFailedError'), { driverError });

describe('isDatabaseUnavailable', () => {
  it('is true for "retry later": lost connections, cancelled statements, lock timeouts, exhausted servers, serialization failures', () => {
    for (const code of ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', '57P01', '57014', '55P03', '53300', '53100', '08006', '25006', '25P03', '40001', '40P01', 'EMFILE', 'ENFILE', 'EADDRNOTAVAIL', 'ENOBUFS']) {
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

describe('failedStatementFields', () => {
  it('unavailable: the reason with its code and cause; else the SQLSTATE, else the caller\'s word; never the message', () => {
    expect(failedStatementFields(wrapped(pgError('57014', 'canceling statement due to statement timeout')))).toEqual({
      reason: 'database unavailable',
      code: '57014',
      cause: 'statement timeout (a lock or a slow query), or cancelled by an operator',
    });
    const quoting = pgError('23505', 'duplicate key value violates unique constraint: Key (x)=(secret-value)');
    expect(failedStatementFields(quoting)).toEqual({ reason: 'error 23505' });
    expect(failedStatementFields(new Error('secret-value'), 'write failed')).toEqual({ reason: 'write failed' });
    expect(failedStatementFields(null)).toEqual({ reason: 'error' });
  });
});

describe('databaseCause', () => {
  it('names the code and our phrase for it, found through the wrappers', () => {
    expect(databaseCause(wrapped(pgError('57014', 'canceling statement due to statement timeout')))).toEqual({
      code: '57014',
      cause: 'statement timeout (a lock or a slow query), or cancelled by an operator',
    });
    expect(databaseCause(pgError('ECONNREFUSED'))).toEqual({ code: 'ECONNREFUSED', cause: 'connection refused' });
    expect(databaseCause(pgError('53300'))).toEqual({ code: '53300', cause: 'too many connections' });
    expect(databaseCause(pgError('57P01'))).toEqual({ code: '57P01', cause: 'server shutting down' });
    expect(databaseCause(pgError('25006'))).toEqual({ code: '25006', cause: 'read-only (a replica or a failover)' });
    expect(databaseCause(Object.assign(new Error('x'), { cause: pgError('40001') }))).toEqual({ code: '40001', cause: 'serialization failure' });
  });

  it("a driver error with no code is named by the fixed text it was recognised by, never the rest of its message", () => {
    expect(databaseCause(wrapped(new Error('Query read timeout')))).toEqual({ code: 'Query read timeout', cause: 'client query timeout (DB_QUERY_TIMEOUT_MS)' });
    expect(databaseCause(new Error("Connection terminated unexpectedly, near 'secret-value'"))).toEqual({
      code: 'Connection terminated unexpectedly',
      cause: 'connection lost',
    });
    // Without "unexpectedly": a statement queued on a connection pg-client.ts ended after its query timeout.
    expect(databaseCause(new Error('Connection terminated'))?.cause).toMatch(/DB_QUERY_TIMEOUT_MS/);
  });

  it('is undefined exactly when the error is not "database unavailable"', () => {
    for (const err of [pgError('23505'), wrapped(pgError('42601')), new Error('canceling statement due to statement timeout'), undefined, '57014']) {
      expect(databaseCause(err)).toBeUndefined();
      expect(isDatabaseUnavailable(err)).toBe(false);
    }
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
