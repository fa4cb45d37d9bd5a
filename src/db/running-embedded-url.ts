import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { untrustedDataDir } from '../common/data-dir.js';
import { requireScramAt } from './pg-client.js';

/**
 * The URL of the embedded PostgreSQL that a gateway started without DATABASE_URL serves from `dataDir`
 * (scripts/pg-server.mjs: `<dataDir>/pg`, its port in postmaster.pid, its password in `<dataDir>/pg.password`), or
 * undefined when there is none running there, `refused` when the folder's secrets cannot be trusted. For the
 * command-line tools run beside such a gateway (`docker exec`): its port changes at every start and its URL is
 * printed nowhere.
 */
export function runningEmbeddedDatabaseUrl(dataDir: string): { url: string; port: number } | { refused: string } | undefined {
  const pgDir = resolve(dataDir, 'pg');
  // Its password and port are taken from the folder as found, as the gateway takes them (untrustedDataDir).
  const untrusted = untrustedDataDir(resolve(dataDir));
  if (untrusted) return { refused: `DATA_DIR: ${untrusted}` };
  try {
    const lines = readFileSync(join(pgDir, 'postmaster.pid'), 'utf8').split('\n');
    const pid = Number(lines[0]);
    const port = Number(lines[3]);
    const password = readFileSync(`${pgDir}.password`, 'utf8').trim();
    if (!Number.isInteger(port) || port <= 0 || port > 65535 || !/^[0-9a-f]{48}$/.test(password)) return undefined;
    if (!Number.isInteger(pid) || pid <= 0) return undefined;
    if (!alive(pid)) return undefined; // a postmaster.pid left by a server that died

    // No SSL on that server: a PGSSLMODE in the shell would otherwise reach the tool's connection (scripts/pg-server.mjs).
    const url = `postgres://postgres:${password}@127.0.0.1:${port}/tool_gateway?sslmode=disable`;
    requireScramAt(url); // as the gateway's own clients do (PasswordSafeClient)
    return { url, port };
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: string }).code === 'EPERM'; // there, but another user's
  }
}
