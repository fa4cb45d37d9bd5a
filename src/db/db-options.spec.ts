import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { dbOptions, migratorOptions, withSessionSettings } from './db-options.js';

/** The driver's client for a pool built from `o`, as it would connect. */
const clientOf = (o: ReturnType<typeof dbOptions>) => {
  const { url, extra } = o as { url: string; extra: pg.ClientConfig };
  return new pg.Client({ ...extra, connectionString: url }) as unknown as {
    connectionParameters: { options?: string; host: string; database: string };
    getStartupConf(): Record<string, string>;
  };
};
/** What the driver sends at connect (ConnectionParameters): the URL's parameters override the config's. */
const sent = (o: ReturnType<typeof dbOptions>) => clientOf(o).connectionParameters;
/** The startup message's parameters themselves. */
const startupParameters = (o: ReturnType<typeof dbOptions>) => clientOf(o).getStartupConf();

const pgOptions = process.env.PGOPTIONS;
afterEach(() => {
  if (pgOptions === undefined) delete process.env.PGOPTIONS;
  else process.env.PGOPTIONS = pgOptions;
});

describe('session settings pinned at connect (startup options)', () => {

  it('every pool sends DateStyle, IntervalStyle, TimeZone and read committed; the migrator also no statement limit, a 30 s idle-in-transaction limit and server keepalives', () => {
    delete process.env.PGOPTIONS;
    const request = sent(dbOptions('postgres://gw@db.internal:5432/tg', 20, 20_000)).options!;
    expect(request).toBe('-c DateStyle=ISO -c IntervalStyle=postgres -c TimeZone=UTC -c default_transaction_isolation=read\\ committed');
    const migrator = sent(migratorOptions('postgres://gw@db.internal:5432/tg')).options!;
    expect(migrator).toBe(
      `${request} -c statement_timeout=0 -c idle_in_transaction_session_timeout=30000 -c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3`,
    );
  });

  it("keeps the user's own options (the URL's, or else PGOPTIONS) ahead of the pinned ones, which win where they overlap", () => {
    process.env.PGOPTIONS = '-c search_path=gw,public ';
    expect(sent(dbOptions('postgres://gw@db.internal/tg')).options).toMatch(/^-c search_path=gw,public -c DateStyle=ISO /);
    // The URL's parameter overrides the config's in the driver: the pinned settings go into it, PGOPTIONS is not read.
    const o = dbOptions('postgres://gw:p%40ss@db.internal:6543/tg?sslmode=disable&options=-c%20lock_timeout%3D5s');
    const read = sent(o);
    expect(read.options).toMatch(/^-c lock_timeout=5s -c DateStyle=ISO .* -c default_transaction_isolation=read\\ committed$/);
    expect([read.host, read.database]).toEqual(['db.internal', 'tg']);
    expect((o as { extra: { options?: string } }).extra.options).toBeUndefined();
    // Given twice, the driver sends the last: that one is kept.
    expect(sent(dbOptions('postgres://gw@db.internal/tg?options=-c%20search_path%3Dold&options=-c%20lock_timeout%3D5s')).options).toMatch(/^-c lock_timeout=5s -c DateStyle=ISO /);
    // A socket form keeps its host-less shape.
    const socket = withSessionSettings('postgres://gw@/tg?host=/var/run/postgresql&options=-c%20jit%3Doff', ['TimeZone=UTC']);
    expect(socket.url).toMatch(/^postgres:\/\/gw@\/tg\?/);
    expect(new pg.Client({ connectionString: socket.url }) as unknown as { host: string }).toMatchObject({ host: '/var/run/postgresql' });
  });
});

describe('DB_CONNECTION_MODE=pooled: no session settings sent', () => {

  it('the request pools and the migrator send only the user, database and application name; the client-side wait stays', () => {
    delete process.env.PGOPTIONS;
    const url = 'postgres://gw@proxy.internal:5432/tg';
    for (const o of [dbOptions(url, 20, 20_000, 'pooled'), dbOptions(url, 20, 5_000, 'pooled'), migratorOptions(url, 'pooled')]) {
      expect(startupParameters(o)).toEqual({ user: 'gw', database: 'tg', application_name: 'tool-gateway' });
      expect((o as { url: string }).url).toBe(url);
    }
    expect((dbOptions(url, 20, 5_000, 'pooled') as { extra: pg.ClientConfig }).extra.query_timeout).toBe(5_000);
    // The default sends them all.
    expect(Object.keys(startupParameters(dbOptions(url, 20, 20_000)))).toEqual(['user', 'database', 'application_name', 'statement_timeout', 'idle_in_transaction_session_timeout', 'options']);
  });
});
