/**
 * The embedded PostgreSQL is UTF8 whatever the host's locale. Its encoding followed the environment: with LANG unset
 * (the Docker image, `env -i`, cron, CI) initdb made a SQL_ASCII cluster, where length() counts bytes, left() cuts
 * UTF-8 characters in half and jsonb refuses \u escapes above U+007F; the gateway's checks count code points, so valid
 * input failed (500). A LANG naming a locale the host lacks failed initdb altogether. A database of the operator's
 * own that is not UTF8 is said at start-up.
 */
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startGatewayProcess, startPgServer } from '../support/gateway-process.js';
import { scratchDatabaseUrl } from '../support/scratch-database.js';
import { adminAuth, startTestApp } from '../support/test-app.js';

const root = resolve('.tmp', `embedded-encoding-${process.pid}`);
afterAll(() => rmSync(root, { recursive: true, force: true }));

const UTF8_WARNING = /the database's encoding is SQL_ASCII, not UTF8/;

describe('database encoding', () => {
  it('with LANG unset, the embedded cluster is UTF8: an org name of 150 non-ASCII code points (limit 200) is accepted', async () => {
    // gatewayEnv passes no LANG/LC_*: as in the production image (node:bookworm-slim sets none).
    const gw = await startGatewayProcess({ DATABASE_URL: undefined, DATA_DIR: resolve(root, 'unset'), LANG: undefined, LC_ALL: undefined }, 90_000);
    try {
      const name = 'é'.repeat(150);
      const res = await gw.http.post('/v1/orgs').set(adminAuth).send({ name });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body.name).toBe(name);
      expect(gw.output()).not.toMatch(UTF8_WARNING);
    } finally {
      await gw.stop();
    }
  }, 120_000);

  it('starts with LANG naming a locale this host does not have (ssh from a desktop forwards LANG)', async () => {
    const before = { LANG: process.env.LANG, LC_ALL: process.env.LC_ALL };
    process.env.LANG = 'de_DE.UTF-8';
    process.env.LC_ALL = 'de_DE.UTF-8';
    try {
      const server = await startPgServer(resolve(root, 'de', 'pg'));
      const c = new pg.Client({ connectionString: server.url });
      await c.connect();
      const { rows } = await c.query<{ e: string }>(`SELECT pg_encoding_to_char(encoding) AS e FROM pg_database WHERE datname = current_database()`);
      await c.end();
      await server.close();
      expect(rows[0].e).toBe('UTF8');
    } finally {
      for (const [k, v] of Object.entries(before)) if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }, 60_000);

  it("a database of the operator's own in SQL_ASCII is said at start-up (a warning naming the fix); UTF8 is not", async () => {
    const dbName = `tg_sqlascii_${process.pid}_${Date.now()}`;
    const admin = new pg.Client({ connectionString: scratchDatabaseUrl('postgres') });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`);
    try {
      const t = await startTestApp({ DATABASE_URL: scratchDatabaseUrl(dbName) });
      const warned = t.logs.filter((l) => UTF8_WARNING.test(l));
      await t.close();
      expect(warned).toHaveLength(1);
      expect(JSON.parse(warned[0])).toMatchObject({ level: 40, context: 'Database' });
      expect(warned[0]).toContain("WITH ENCODING 'UTF8'");
      const utf8 = await startTestApp();
      const none = utf8.logs.filter((l) => UTF8_WARNING.test(l));
      await utf8.close();
      expect(none).toEqual([]);
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      await admin.end();
    }
  }, 90_000);
});
