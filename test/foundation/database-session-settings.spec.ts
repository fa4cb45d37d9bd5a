import pg from 'pg';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratorOptions } from '../../src/db/db-options.js';
import { ledgerVerifyCommand } from '../../src/ops/ledger-verify.command.js';
import { approvalFor, refundUse } from '../approvals/support.js';
import { createScratchDatabase, type ScratchDatabase } from '../support/scratch-database.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';

/**
 * A shop's own PostgreSQL (DATABASE_URL) whose database sets what the gateway's code does not expect (ALTER DATABASE …
 * SET, as ALTER ROLE or postgresql.conf might). Before the connections pinned their session settings (db-options.ts,
 * settings review): DateStyle 'SQL, DMY' read every timestamp back as null — 500s, and a new API key stored with its
 * one answer lost; serializable transactions failed concurrent calls with 500s and left executed calls `running`; and
 * the database's statement_timeout applied to the migrations, which set "none" by not sending it.
 */
const SHOP_SETTINGS = {
  DateStyle: "'SQL, DMY'",
  IntervalStyle: "'sql_standard'",
  TimeZone: "'Asia/Kolkata'",
  default_transaction_isolation: "'serializable'",
  statement_timeout: "'2s'",
  idle_in_transaction_session_timeout: "'5s'",
};

describe("a database with a shop's own settings", () => {
  let db: ScratchDatabase;
  let h: Harness;

  beforeAll(async () => {
    db = await createScratchDatabase('tg_session_settings');
    const name = new URL(db.url).pathname.slice(1);
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      for (const [k, v] of Object.entries(SHOP_SETTINGS)) await c.query(`ALTER DATABASE ${name} SET ${k} = ${v}`);
    } finally {
      await c.end();
    }
    h = await startHarness({ DATABASE_URL: db.url }); // migrates it, under those settings
  }, 90_000);
  afterAll(async () => {
    await h?.close();
    await db?.drop();
  });

  it("the gateway's sessions run with the settings its code is written for; a plain session keeps the database's", async () => {
    const setting = async (q: (sql: string) => Promise<unknown>) =>
      ((await q(
        `SELECT current_setting('DateStyle') AS ds, current_setting('IntervalStyle') AS iv, current_setting('TimeZone') AS tz,
                current_setting('default_transaction_isolation') AS iso, current_setting('statement_timeout') AS st,
                current_setting('idle_in_transaction_session_timeout') AS it`,
      )) as { rows?: unknown[] } & unknown[]);
    const pinned = { ds: expect.stringMatching(/^ISO,/), iv: 'postgres', tz: 'UTC', iso: 'read committed' };
    expect((await setting((s) => h.t.ds.query(s)))[0]).toEqual({ ...pinned, st: '15s', it: '20s' });
    const migrator = await new DataSource(migratorOptions(db.url)).initialize();
    try {
      expect((await setting((s) => migrator.query(s)))[0]).toEqual({ ...pinned, st: '0', it: '30s' });
      expect(await migrator.query('SELECT pg_sleep(2.2)').then(() => 'ran', (e: Error) => e.message)).toBe('ran'); // past the database's 2 s
    } finally {
      await migrator.destroy();
    }
    const plain = new pg.Client({ connectionString: db.url });
    await plain.connect();
    try {
      expect((await plain.query('SHOW DateStyle')).rows[0]).toEqual({ DateStyle: 'SQL, DMY' }); // the settings are the database's
    } finally {
      await plain.end();
    }
  });

  it('keys, orgs, runs, calls and approvals answer with their times; verify passes', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
    const expert = await createKey(h.t, org.orgId, 'expert');
    const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
    const key = await h.t.http.post('/v1/api-keys').set(adminAuth).send({ orgId: org.orgId, role: 'ops', name: 'ops' });
    expect([key.status, key.body.createdAt]).toEqual([201, expect.stringMatching(iso)]);
    expect((await h.t.http.get(`/v1/orgs/${org.orgId}`).set(adminAuth)).body.createdAt).toMatch(iso);
    expect((await h.t.http.get(`/v1/runs/${org.runId}`).set(bearer(org.agentKey))).body.createdAt).toMatch(iso);
    const call = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(call.body.status).toBe('succeeded');
    const view = await h.t.http.get(`/v1/tool-calls/${call.body.toolCallId as string}`).set(bearer(key.body.key as string));
    expect([view.status, view.body.createdAt, view.body.finishedAt]).toEqual([200, expect.stringMatching(iso), expect.stringMatching(iso)]);
    // An hour's window around now finds it (the database's own zone is +05:30).
    const since = new Date(Date.now() - 3_600_000).toISOString();
    const listed = await h.t.http.get(`/v1/tool-calls?since=${since}`).set(bearer(key.body.key as string));
    expect(listed.status).toBe(200);
    expect((listed.body.items as { id: string }[]).map((i) => i.id)).toContain(call.body.toolCallId);
    const gated = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('4.00'));
    expect(gated.status).toBe(202);
    const approval = await approvalFor(h, expert.key, gated.body.toolCallId as string);
    expect((await h.t.http.get(`/v1/approvals/${approval.id}`).set(bearer(expert.key))).body.expiresAt).toMatch(iso);
    const out: string[] = [];
    expect(await ledgerVerifyCommand(['--org', org.orgId], { DATABASE_URL: db.url }, { out: (l) => out.push(l), err: (l) => out.push(l) }), out.join('\n')).toBe(0);
  });

  it('concurrent calls of one run under the database\'s serializable default: none answered 5xx, none left running', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const statuses: number[] = [];
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: String(1001 + (i % 3)) })),
        ),
      );
      statuses.push(...answers.map((a) => a.status));
    }
    const [{ n }] = (await h.t.ds.query(`SELECT count(*)::int AS n FROM tool_calls WHERE org_id = $1 AND status = 'running'`, [org.orgId])) as [{ n: number }];
    expect({ statuses: [...new Set(statuses)], running: n }).toEqual({ statuses: [200], running: 0 });
  });
});
