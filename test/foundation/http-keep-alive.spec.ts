/**
 * An idle keep-alive connection is kept for HTTP_KEEP_ALIVE_TIMEOUT_MS (default 65 s, above a load balancer's 60 s
 * idle timeout), not Node's 5 s (proxy review): a balancer that reuses a pooled connection just as the gateway closes
 * it loses that request (502 there). Here with 1 s, to see both ends of it quickly.
 */
import type { Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/app-config.js';
import { TEST_ADMIN_KEY, TEST_MASTER_KEY } from '../support/secrets.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

describe('idle keep-alive connections', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ HTTP_KEEP_ALIVE_TIMEOUT_MS: '1000' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('defaults to 65 s, above the usual load-balancer idle timeout', () => {
    const config = loadConfig({ NODE_ENV: 'test', DATABASE_URL: process.env.DATABASE_URL, MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY, BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY, DATA_DIR: '.tmp/data-test' });
    expect(config.HTTP_KEEP_ALIVE_TIMEOUT_MS).toBe(65_000);
    expect((t.app.getHttpServer() as Server).keepAliveTimeout).toBe(1_000);
  });

  it('a connection idle for less than the setting takes the next request; one idle longer is closed by the gateway', async () => {
    const port = ((t.app.getHttpServer() as Server).address() as AddressInfo).port;
    const s = connect(port, '127.0.0.1');
    let got = '';
    let closedAt: number | undefined;
    s.setEncoding('utf8').on('data', (c: string) => (got += c));
    s.on('close', () => (closedAt = Date.now()));
    const get = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';
    s.write(get);
    await new Promise((r) => setTimeout(r, 600)); // idle 0.6 s: kept
    s.write(get);
    await new Promise((r) => setTimeout(r, 200));
    expect(got.match(/HTTP\/1\.1 200/g)).toHaveLength(2);
    const second = Date.now();
    for (let i = 0; i < 40 && closedAt === undefined; i++) await new Promise((r) => setTimeout(r, 100));
    expect(closedAt).toBeDefined(); // the gateway closed it, idle past 1 s (Node adds a second of its own)
    expect(closedAt! - second).toBeGreaterThanOrEqual(900);
    s.destroy();
  });
});
