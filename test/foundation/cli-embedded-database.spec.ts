/**
 * README "Rotating the master key" runs credentials-rotate against the database the gateway uses. A gateway on its
 * embedded database (no DATABASE_URL: the image run alone, `npm start`) serves it on a port chosen at each start,
 * printed nowhere: the command, run beside it with the gateway's environment (`docker exec … node
 * dist/src/cli/credentials-rotate.js`), refused with "DATABASE_URL is required", and the old key could never be
 * retired. credentials-rotate and ledger-verify now find the database a gateway serves from their DATA_DIR.
 */
import { chmodSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { NIL_UUID } from '../../src/common/ids.js';
import { runBuiltCli } from '../support/built-cli.js';
import { startGatewayProcess } from '../support/gateway-process.js';
import { TEST_MASTER_KEY } from '../support/secrets.js';

const root = resolve('.tmp', `cli-embedded-${process.pid}-${Date.now()}`);
const stopped = resolve('.tmp', `cli-embedded-none-${process.pid}-${Date.now()}`);
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
  rmSync(stopped, { recursive: true, force: true });
});

describe('the command-line tools beside a gateway on its embedded database', () => {
  it('credentials-rotate and ledger-verify use the database the gateway in DATA_DIR serves; with none running, they say so (exit 2)', async () => {
    const gw = await startGatewayProcess({ DATABASE_URL: undefined, DATA_DIR: root }, 90_000);
    try {
      const env = { NODE_ENV: 'production', DATABASE_URL: '', DATA_DIR: root };
      const rotated = await runBuiltCli('credentials-rotate', [], { ...env, MASTER_ENCRYPTION_KEYS: `k1:${TEST_MASTER_KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k1' });
      // Before: exit 2, "DATABASE_URL is required".
      expect(rotated.code, rotated.stderr).toBe(0);
      expect(rotated.stderr).toMatch(/^using the embedded database of the gateway running in .* \(127\.0\.0\.1:\d+\)\nrotation [0-9a-f-]{36} started: its credentials\.rotated events carry this rotationId\n$/);
      expect(JSON.parse(rotated.stdout)).toMatchObject({ toKeyId: 'k1', failures: [] });
      const verified = await runBuiltCli('ledger-verify', ['--org', NIL_UUID], env);
      expect(verified.code, verified.stderr).toBe(0);
      expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true });
    } finally {
      await gw.stop();
    }
    // The gateway gone (its postmaster.pid too), or never there: the requirement is said, naming the folder.
    mkdirSync(stopped, { recursive: true });
    for (const dataDir of [root, stopped]) {
      const none = await runBuiltCli('ledger-verify', ['--org', NIL_UUID], { NODE_ENV: 'production', DATABASE_URL: '', DATA_DIR: dataDir });
      expect(none.code).toBe(2);
      expect(none.stderr).toContain(`DATABASE_URL is required, or a gateway running on its embedded database in DATA_DIR (${dataDir} has none running)`);
    }
  }, 180_000);

  it('a DATA_DIR others can write is refused (exit 2, naming it) before its planted postmaster.pid and pg.password are used', async () => {
    const planted = resolve('.tmp', `cli-embedded-planted-${process.pid}-${Date.now()}`);
    const listener = createServer((s) => (connected++, s.destroy()));
    let connected = 0;
    try {
      mkdirSync(join(planted, 'pg'), { recursive: true });
      chmodSync(planted, 0o777);
      await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
      const { port } = listener.address() as AddressInfo;
      // A live pid (this one) and a well-formed password: before, the tools logged in there.
      writeFileSync(join(planted, 'pg', 'postmaster.pid'), `${process.pid}\n${planted}/pg\n0\n${port}\n`);
      writeFileSync(join(planted, 'pg.password'), `${'ab'.repeat(24)}\n`, { mode: 0o600 });
      const env = { NODE_ENV: 'production', DATABASE_URL: '', DATA_DIR: planted };
      const verified = await runBuiltCli('ledger-verify', ['--org', NIL_UUID], env);
      const rotated = await runBuiltCli('credentials-rotate', [], { ...env, MASTER_ENCRYPTION_KEYS: `k1:${TEST_MASTER_KEY}`, MASTER_ENCRYPTION_ACTIVE_KEY_ID: 'k1' });
      for (const r of [verified, rotated]) {
        expect(r.code, r.stderr).toBe(2);
        expect(r.stderr).toContain(`DATA_DIR: ${planted} can be written by others (mode 777)`);
      }
      expect(connected).toBe(0);
    } finally {
      listener.close();
      rmSync(planted, { recursive: true, force: true });
    }
  });
});
