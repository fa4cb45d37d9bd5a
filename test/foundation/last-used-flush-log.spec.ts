import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiKeysService } from '../../src/auth/api-keys.service.js';
import { loadConfig } from '../../src/config/app-config.js';
import { TEST_ADMIN_KEY, TEST_MASTER_KEY } from '../support/secrets.js';

/**
 * The lastUsedAt flush (every 30 s) during a database outage: a line on entering the failure, then at most one a minute
 * (PeriodicTask's streak). It used to catch its own failure and warn on every tick, the uses kept for the next.
 * (The database is one that refuses: the flush's statement is all there is to fail.)
 */
describe('lastUsedAt flush while the database is away', () => {
  afterEach(() => vi.useRealTimers());

  it('does not warn on every 30 s tick for 10 minutes', async () => {
    vi.useFakeTimers();
    const config = loadConfig({ NODE_ENV: 'test', DATABASE_URL: 'postgres://x@127.0.0.1:1/x', MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY, BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY });
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const ds = { query: () => Promise.reject(refused), getRepository: () => ({}) };
    const clock = { now: () => new Date(), nowMs: () => Date.now() };
    const svc = new ApiKeysService(ds as never, {} as never, {} as never, config, clock as never);
    const log = (svc as unknown as { log: { warn: (...a: unknown[]) => void; log: (...a: unknown[]) => void } }).log;
    const warns: string[] = [];
    vi.spyOn(log, 'warn').mockImplementation((...a: unknown[]) => void warns.push(String(a.at(-1))));
    vi.spyOn(log, 'log').mockImplementation(() => undefined);
    (svc as unknown as { touch: (id: string, at: number) => void }).touch('00000000-0000-0000-0000-000000000001', Date.now());
    await vi.advanceTimersByTimeAsync(10 * 60_000 + 1_000);
    // one on entering the failure, then at most one a minute (PeriodicTask's own policy, FAILURE_REMINDER_MS)
    expect(warns.length).toBeLessThanOrEqual(11);
    expect(warns[0]).toMatch(/^lastUsedAt flush failed: /);
    expect(warns.slice(1).every((w) => /^lastUsedAt flush still failing, \d+ runs in a row/.test(w))).toBe(true);
    await (svc as unknown as { flushes: { stop: () => Promise<void> } }).flushes.stop();
  });
});
