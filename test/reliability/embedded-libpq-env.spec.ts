/**
 * README Quick start: `npm start` without DATABASE_URL serves on its embedded PostgreSQL. A PGSSLMODE=require in the
 * user's shell (usual for anyone who uses psql against a hosted PostgreSQL) reaches the gateway's own connections to
 * its embedded server (node-pg reads PGSSLMODE when `ssl` is not set), which has no SSL: the start fails with
 * TypeORM's retries and "The server does not support SSL connections", exit 1. The embedded URL now pins
 * sslmode=disable (scripts/pg-server.mjs, the printed URL; src/db/running-embedded-url.ts for the command-line tools).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runningEmbeddedDatabaseUrl } from '../../src/db/running-embedded-url.js';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js';

const parent = mkdtempSync(join(tmpdir(), 'emb-sslmode-'));
chmodSync(parent, 0o755); // started as root, the cluster runs as the postgres user, which must pass through
const dataDir = join(parent, 'data');

describe('embedded PostgreSQL and the libpq variables of the user shell', () => {
  let gw: GatewayProcess | undefined;
  afterAll(async () => {
    await gw?.stop();
    rmSync(parent, { recursive: true, force: true });
  });

  it('PGSSLMODE=require in the environment: the gateway still starts on its embedded PostgreSQL', async () => {
    gw = await startGatewayProcess({ DATABASE_URL: undefined, DATA_DIR: dataDir, PGSSLMODE: 'require' }, 120_000);
    expect((await gw.http.get('/readyz')).status).toBe(200);
    expect(runningEmbeddedDatabaseUrl(dataDir)).toHaveProperty('url', expect.stringMatching(/^postgres:\/\/postgres:[0-9a-f]{48}@127\.0\.0\.1:\d+\/tool_gateway\?sslmode=disable$/));
  }, 180_000);
});
