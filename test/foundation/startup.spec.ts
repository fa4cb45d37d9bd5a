import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { describe, expect, it } from 'vitest';
import { TEST_ADMIN_KEY, TEST_MASTER_KEY } from '../support/secrets.js';

/** Runs the built gateway (npm test builds first) as a user would. */
function startMain(env: Record<string, string>) {
  return spawn(process.execPath, ['dist/src/main.js'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

describe('start-up', () => {
  it('exits non-zero listing every bad variable, without echoing secrets', async () => {
    const child = startMain({ NODE_ENV: 'production', PORT: 'eighty', VENDOR_TIMEOUT_MS: '-5', DATABASE_URL: 'mysql://user:pw-secret@x/db' });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).not.toBe(0);
    for (const v of ['PORT', 'VENDOR_TIMEOUT_MS', 'DATABASE_URL', 'MASTER_ENCRYPTION_KEY']) expect(stderr).toContain(v);
    expect(stderr).not.toContain('pw-secret');
  });

  it('serves with a good config and stops cleanly on SIGTERM', async () => {
    const child = startMain({
      NODE_ENV: 'production', PORT: '0', HOST: '127.0.0.1', DATABASE_URL: process.env.DATABASE_URL!,
      MASTER_ENCRYPTION_KEY: TEST_MASTER_KEY, BOOTSTRAP_ADMIN_KEY: TEST_ADMIN_KEY, LOG_LEVEL: 'warn',
    });
    const lines = createInterface({ input: child.stdout });
    let url: string | undefined;
    for await (const line of lines) {
      const m = /listening on (http:\/\/[^\s]+)/.exec(line);
      if (m) {
        url = m[1];
        break;
      }
    }
    expect(url).toBeDefined();
    const res = await fetch(`${url}/readyz`);
    expect(res.status).toBe(200);
    const orgs = await fetch(`${url}/v1/orgs`, { method: 'POST', headers: { Authorization: `Bearer ${TEST_ADMIN_KEY}`, 'Content-Type': 'application/json' }, body: '{"name":"from main"}' });
    expect(orgs.status).toBe(201);
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(0);
  });
});
