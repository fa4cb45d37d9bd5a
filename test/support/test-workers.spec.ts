import { describe, expect, it } from 'vitest';
import { CONNECTIONS_PER_WORKER, connectionShortfall, testWorkers } from './test-workers.js';

describe('test workers and the test server\'s connections', () => {
  it('TEST_WORKERS: 2 when unset, a whole number ≥ 1, else a clear error', () => {
    expect(testWorkers({})).toBe(2);
    expect(testWorkers({ TEST_WORKERS: '1' })).toBe(1);
    for (const bad of ['0', '-1', '1.5', 'two', '']) expect(() => testWorkers({ TEST_WORKERS: bad })).toThrow(/^TEST_WORKERS must be a whole number ≥ 1/);
  });

  it('a server with too few connections for the workers is named, with the worker count it can carry', () => {
    expect(connectionShortfall(200, 2)).toBeUndefined(); // the embedded server (scripts/pg-server.mjs)
    expect(connectionShortfall(100, 1)).toBeUndefined(); // a stock PostgreSQL, one worker
    const said = connectionShortfall(100, 2);
    expect(said).toContain(`the test server allows 100 connections; 2 test workers may need ${2 * CONNECTIONS_PER_WORKER + 10}`);
    expect(said).toMatch(/run with TEST_WORKERS=1$/);
    expect(connectionShortfall(50, 2)).toMatch(/TEST_WORKERS=1$/); // never 0
  });
});
