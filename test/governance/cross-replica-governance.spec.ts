import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emulatorEnv, setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * An admin change made on one replica is in force for the next call on every replica (ARCHITECTURE.md
 * "Scale": decisions that must hold across replicas live in PostgreSQL). The other replica decides on its
 * caches (1 s), and the intent statement checks the flag and policy version it decided on are still the
 * org's: if not, nothing is written and the call is decided again on fresh reads.
 */
describe('admin changes vs. another replica', () => {
  let h: Harness;
  let replica: TestApp;
  beforeAll(async () => {
    h = await startHarness();
    replica = await startTestApp({ ...emulatorEnv(h.emu.url), VENDOR_TIMEOUT_MS: '2000', VENDOR_CONNECT_TIMEOUT_MS: '500' });
  });
  afterAll(async () => {
    await replica?.close();
    await h?.close();
  });

  const addNote = (note: string) => toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note });
  const notesSent = (from: number, marker: string) => h.emu.requests.slice(from).filter((r) => r.body.includes(marker)).length;

  it('tool_calling_enabled turned off (200) on replica A: the next write on replica B must be blocked FEATURE_DISABLED', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    // replica B has the org's flags cached (any call does it)
    expect((await replica.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(addNote('warm-up'))).body.status).toBe('succeeded');
    const off = await h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false });
    expect(off.status).toBe(200);
    const from = h.emu.requests.length;
    const res = await replica.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(addNote('after-kill-switch'));
    const sent = notesSent(from, 'after-kill-switch');
    expect({ status: res.body.status, errorCode: res.body.errorCode, sentToVendor: sent }).toEqual({ status: 'blocked', errorCode: 'FEATURE_DISABLED', sentToVendor: 0 });
  });

  it('a block rule saved (200) on replica A: the next matching write on replica B must be POLICY_BLOCKED', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'], rules: [] });
    expect((await replica.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(addNote('warm-up-2'))).body.status).toBe('succeeded');
    const put = await h.t.http
      .put(`/v1/orgs/${org.orgId}/policies`)
      .set(adminAuth)
      .send({ rules: [{ id: 'no-notes', match: { toolName: 'shopify_order.add_note' }, decision: 'block' }] });
    expect(put.status).toBe(200);
    const from = h.emu.requests.length;
    const res = await replica.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(addNote('after-block-rule'));
    const sent = notesSent(from, 'after-block-rule');
    const [pd] = (await h.t.ds.query(`SELECT decision, rule_id FROM policy_decisions WHERE tool_call_id = $1`, [res.body.toolCallId])) as { decision: string; rule_id: string | null }[];
    expect({ status: res.body.status, errorCode: res.body.errorCode, sentToVendor: sent, decision: pd?.decision }).toEqual({
      status: 'blocked', errorCode: 'POLICY_BLOCKED', sentToVendor: 0, decision: 'block',
    });
    // One call row for it: the first decision wrote nothing.
    const rows = (await h.t.ds.query("SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1 AND action_digest = $2", [org.runId, (await h.t.ds.query('SELECT action_digest FROM tool_calls WHERE id = $1', [res.body.toolCallId]))[0].action_digest])) as { n: number }[];
    expect(rows[0].n).toBe(1);
  });

  it('turned back on (or a rule removed) on replica A: replica B runs the next call instead of refusing it from its cache', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'], flag: false });
    expect((await replica.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(addNote('while-off'))).body.errorCode).toBe('FEATURE_DISABLED');
    expect((await h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: true })).status).toBe(200);
    const res = await replica.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(addNote('after-on'));
    expect(res.body.status).toBe('succeeded');
  });
});
