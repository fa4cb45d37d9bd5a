import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFullEmulator, type VendorEmulator } from '../../src/emulator/index.js';
import { emulatorEnv, setupOrg, toolUse, type OrgSetup } from '../support/scenario.js';
import { startTcpProxy, viaProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { adminAuth, bearer, startTestApp, type TestApp } from '../support/test-app.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The gateway end to end: an admin's flag change (a TypeORM transaction) is cut off by a short partition and
 * answered 503 after DB_QUERY_TIMEOUT_MS. Its connection kept the statement in flight and went back to the pool;
 * when the network healed the statement ran, and the connection stayed "idle in transaction". The next tool calls'
 * intent and outcome writes that landed on it ran inside that transaction: 200 succeeded and the note at the
 * vendor, yet nothing committed (or a 500 when the intent and the outcome took different connections). The pool's
 * close rolled it all back, so the same tool_uses posted again ran at the vendor again.
 */
describe('a partition during a TypeORM transaction, past DB_QUERY_TIMEOUT_MS', () => {
  const env = (emuUrl: string) => ({ ...emulatorEnv(emuUrl), LEDGER_SEAL_INTERVAL_MS: '60000', VENDOR_TIMEOUT_MS: '5000' });
  let emu: VendorEmulator;
  let proxy: TcpProxy;
  let t: TestApp;
  let org: OrgSetup;
  let direct: pg.Client;

  beforeAll(async () => {
    emu = createFullEmulator();
    await emu.start();
    const db = new URL(process.env.DATABASE_URL!);
    proxy = await startTcpProxy(db.hostname, Number(db.port || 5432));
    // Two connections, so the cut-off one is soon reused; the lowest timeout, so the test is quick.
    t = await startTestApp({ ...env(emu.url), DATABASE_URL: viaProxy(proxy), DB_POOL_SIZE: '2', DB_QUERY_TIMEOUT_MS: '1000' });
    org = await setupOrg(t, { tools: ['shopify_order.add_note'] });
    direct = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await direct.connect();
  }, 60_000);
  afterAll(async () => {
    proxy?.blackhole(false);
    await direct?.end();
    await t?.close();
    await proxy?.close();
    await emu?.stop();
  });

  it('every tool call answered after the network heals is committed, and posting the tool_uses again (after a restart) sends nothing new', async () => {
    const flag = () => t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: true });
    expect((await flag()).status).toBe(200); // the admin key is cached: the partition starts inside the transaction

    proxy.stallOn('pg_advisory_xact_lock'); // the flag change's first statement after BEGIN
    const cutOff = await flag();
    expect({ silent: proxy.silent(), status: cutOff.status, code: (cutOff.body as { code?: string }).code }).toEqual({ silent: true, status: 503, code: 'DATABASE_UNAVAILABLE' });
    proxy.blackhole(false);
    await sleep(300); // the held statement reaches the server, if its connection is still there
    const [{ n: idleInTransaction }] = (
      await direct.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'tool-gateway' AND state = 'idle in transaction'`)
    ).rows as [{ n: number }];

    emu.reset();
    const uses = Array.from({ length: 6 }, (_, i) => toolUse('shopify_order', { action: 'add_note', orderId: '1001', note: `query-timeout note ${i}` }));
    const post = (use: (typeof uses)[number]) => t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use).then((r) => r);
    const statuses: number[] = [];
    for (let i = 0; i < uses.length; i += 2) statuses.push(...(await Promise.all(uses.slice(i, i + 2).map(post))).map((r) => r.status)); // two at a time: both connections
    const committed = async () =>
      ((await direct.query('SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1 AND tool_use_id = ANY($2)', [org.runId, uses.map((u) => u.id)])).rows[0] as { n: number }).n;
    const committedWhenAnswered = await committed();

    // A rolling deploy: this gateway stops (its pool closes), another starts, and the agents post the same tool_uses.
    await t.close();
    t = await startTestApp(env(emu.url));
    for (const use of uses) await post(use);
    const notesSent = emu.requests.filter((r) => r.vendor === 'shopify' && r.body.includes('orderUpdate')).length;

    expect({ idleInTransaction, statuses, committedWhenAnswered, committedAfterRestart: await committed(), notesSent }).toEqual({
      idleInTransaction: 0,
      statuses: uses.map(() => 200),
      committedWhenAnswered: uses.length,
      committedAfterRestart: uses.length,
      notesSent: uses.length,
    });
  }, 60_000);
});
