import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { databaseTarget } from './database-probe.js';
import { readDatabaseUrl, withDatabaseName } from './database-url.js';

describe('DATABASE_URL as the driver reads it, the Unix-socket form without a host included', () => {
  it('withDatabaseName: another database on the same server, in a form the driver reads as that (migrate check’s scratch database)', () => {
    for (const [url, expected] of [
      ['postgres://gateway:p%40ss@db.internal:6543/tool_gateway?sslmode=require', 'postgres://gateway:p%40ss@db.internal:6543/tg_drift_1?sslmode=require'],
      ['postgres://gateway:pw@/tool_gateway?host=/var/run/postgresql&port=5433', 'postgres://gateway:pw@/tg_drift_1?host=/var/run/postgresql&port=5433'],
      ['postgres://gateway@/tool_gateway?host=/var/run/postgresql', 'postgres://gateway@/tg_drift_1?host=/var/run/postgresql'],
      ['postgres:///tool_gateway?host=/var/run/postgresql', 'postgres:///tg_drift_1?host=/var/run/postgresql'],
    ]) {
      const out = withDatabaseName(url, 'tg_drift_1');
      expect(out, url).toBe(expected);
      // As the driver reads them (ConnectionParameters): the same server, user and options, the other database.
      const read = (u: string) => {
        const c = new pg.Client({ connectionString: u }) as unknown as Record<string, unknown>;
        return { host: c.host, port: c.port, user: c.user, ssl: c.ssl, database: c.database };
      };
      const before = read(url);
      const after = read(out);
      expect({ ...after, database: before.database }, url).toEqual(before);
      expect(after.database).toBe('tg_drift_1');
    }
  });

  it('readDatabaseUrl reads a socket form (WHATWG URL alone refuses it); databaseTarget names the socket, never the password', () => {
    expect(() => new URL('postgres://gateway:pw@/db?host=/run/pg')).toThrow();
    expect(readDatabaseUrl('postgres://gateway:pw@/db?host=/run/pg').searchParams.get('host')).toBe('/run/pg');
    expect(databaseTarget('postgres://gateway:s3cret@/tool_gateway?host=/var/run/postgresql&port=5433')).toBe('/var/run/postgresql:5433/tool_gateway');
    expect(databaseTarget('postgres://gateway:s3cret@db.internal:6543/tool_gateway')).toBe('db.internal:6543/tool_gateway');
  });
});
