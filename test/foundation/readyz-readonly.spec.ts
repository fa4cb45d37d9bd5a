import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropScratchDatabase, scratchDatabaseUrl } from '../support/scratch-database.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

/**
 * A failover window: the database endpoint now reaches a server that is read-only (a replica, a demoted primary).
 * The gateway refuses every write DATABASE_UNAVAILABLE (25006), so /readyz says not ready too (a load balancer takes
 * the replica out of rotation), and ready again once a writable server answers.
 */
describe('/readyz against a read-only database', () => {
  let admin: pg.Client;
  let dbName: string;
  let h: Harness;
  let org: OrgSetup;

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: process.env.TEST_SERVER_URL ?? process.env.DATABASE_URL });
    await admin.connect();
    dbName = `tg_observe_ro_${process.pid}_${Date.now()}`;
    await admin.query(`CREATE DATABASE ${dbName}`);
    h = await startHarness({ DATABASE_URL: scratchDatabaseUrl(dbName) });
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    try {
      if (admin) await dropScratchDatabase(admin, dbName);
    } finally {
      await admin?.end();
    }
  });

  it('says not ready while every tool call is answered 503 DATABASE_UNAVAILABLE', async () => {
    // The server turns read-only (what a failover to a replica looks like to a client): new sessions are read-only,
    // and the sessions open now are ended, as a failover ends them.
    await admin.query(`ALTER DATABASE ${dbName} SET default_transaction_read_only = on`);
    await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [dbName]);
    // The gateway's own verdict on a write now: the database is unavailable.
    let call: { status: number; body: { code?: string } } = { status: 0, body: {} };
    await waitFor(async () => {
      call = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
      return call.status === 503;
    }, 'a tool call answered 503', 20_000);
    expect(call.body.code).toBe('DATABASE_UNAVAILABLE');
    // Readiness on the same database, at the same moment.
    const ready = await h.t.http.get('/readyz');
    await admin.query(`ALTER DATABASE ${dbName} RESET default_transaction_read_only`);
    expect([ready.status, ready.body.code, ready.body.database], JSON.stringify(ready.body)).toEqual([503, 'DATABASE_UNAVAILABLE', 'read-only']);
    // Writable again (the failover done: sessions reach the new primary): ready, and calls go through.
    await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, [dbName]);
    await waitFor(async () => (await h.t.http.get('/readyz')).status === 200, '/readyz ready again', 20_000);
    await waitFor(async () => {
      const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }, 'toolu_after_failover'));
      return res.status === 200;
    }, 'a tool call answered 200', 20_000);
  }, 60_000);
});
