import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ledgerVerifyCommand } from '../../src/ops/ledger-verify.command.js';
import { setupOrg, startHarness, toolUse, verifyLedger, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

/**
 * An org whose rows were all deleted around the gateway, its org row too (plain SQL, the app role: nothing cascades to
 * its events, which stay): the API's verify walks the events and answers the break; the ledger:verify CLI refused
 * with exit 2 "no org <id>", a usage error, though the org's sealed history was all there. It now verifies it: exit 1.
 * An id with neither a row nor an event is still a usage error.
 */
describe('verify of an org erased around the gateway', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('verify of an org whose rows were deleted (its events remain) reports a break, not 404', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(res.body.status, JSON.stringify(res.body)).toBe('succeeded');
    expect(await verifyLedger(h.t, org.orgId)).toMatchObject({ ok: true });

    const tables = ['approval_requests', 'policy_decisions', 'tool_call_results', 'tool_calls', 'agent_runs', 'integration_credentials', 'policies', 'tool_permissions', 'feature_flags', 'api_keys'];
    for (const table of tables) await h.t.ds.query(`DELETE FROM ${table} WHERE org_id = $1`, [org.orgId]);
    await h.t.ds.query(`DELETE FROM orgs WHERE id = $1`, [org.orgId]);
    const [{ n }] = (await h.t.ds.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE org_id = $1 AND hash IS NOT NULL`, [org.orgId])) as { n: number }[];
    expect(n).toBeGreaterThan(5); // the sealed history is all still there

    const v = await h.t.http.get('/v1/ledger/verify').query({ orgId: org.orgId }).set(adminAuth);
    expect(v.status, `API verify: ${v.status} ${JSON.stringify(v.body)}`).toBe(200);
    expect(v.body).toMatchObject({ ok: false });
    const out: string[] = [];
    const err: string[] = [];
    const code = await ledgerVerifyCommand(['--org', org.orgId], { DATABASE_URL: process.env.DATABASE_URL }, { out: (l) => out.push(l), err: (l) => err.push(l) });
    expect(code, `CLI: ${out.join('\n')} ${err.join('\n')}`).toBe(1);
    expect(JSON.parse(out.join(''))).toMatchObject({ ok: false });

    const none = await ledgerVerifyCommand(['--org', '5a1d7c1e-0000-4000-8000-00000000e4a5'], { DATABASE_URL: process.env.DATABASE_URL }, { out: () => undefined, err: () => undefined });
    expect(none).toBe(2);
  });
});
