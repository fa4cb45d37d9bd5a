import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HealthController } from '../../src/health/health.controller.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * /readyz means "database reachable" (API.md §8), not "a request connection is
 * free": with every pooled connection in a slow but healthy statement it must
 * still answer 200, or a load spike takes every replica out of rotation at once.
 */
describe('/readyz', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ DB_POOL_SIZE: '2' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answers 200 while every connection of the request pool is busy', async () => {
    const busy = [t.ds.query('SELECT pg_sleep(3)'), t.ds.query('SELECT pg_sleep(3)')];
    try {
      await new Promise((r) => setTimeout(r, 200));
      const t0 = performance.now();
      const res = await t.http.get('/readyz');
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toEqual({ status: 'ready', database: 'up' });
      expect(performance.now() - t0).toBeLessThan(1_000); // it did not wait for a pooled connection
    } finally {
      await Promise.all(busy);
    }
  }, 20_000);

  it('closes its own connection when the app shuts down', async () => {
    const other = await startTestApp();
    const probe = other.app.get(HealthController).probe;
    expect((await other.http.get('/readyz')).status).toBe(200);
    await other.close();
    await expect(probe.ping()).rejects.toThrow(/after calling end/);
  });
});
