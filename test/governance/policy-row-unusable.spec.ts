import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

/**
 * A policies row whose rules the pipeline cannot use (a hand edit: 'null'::jsonb passes the NOT NULL, an object, a rule
 * of an unknown shape) blocks every call of the org, fail closed. GET showed it as `rules: []` (no policy: the
 * catalog's defaults) or echoed an object where the contract has a list; it now says the policy is unusable and why.
 */
describe('GET /policies of a stored policy the pipeline cannot use', () => {
  let h: Harness;
  let a: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    a = await setupOrg(h.t, { tools: ['order_lookup.lookup'], rules: [{ id: 'r1', match: { toolName: 'order_lookup.*' }, decision: 'allow' }] });
  });
  afterAll(async () => {
    await h?.close();
  });

  const lookup = () => h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(bearer(a.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));

  it.each([
    ['JSON null', `'null'::jsonb`, [], /rules must be an array/],
    ['an object', `'{"id": "r1"}'::jsonb`, [], /rules must be an array/],
    ['a rule of an unknown shape', `'[{"id": "r1", "decision": "maybe"}]'::jsonb`, [{ id: 'r1', decision: 'maybe' }], /decision/],
  ])('%s: the calls are blocked, and GET says the policy is unusable and why', async (_label, stored, shownRules, why) => {
    await h.t.ds.query(`UPDATE policies SET rules = ${stored} WHERE org_id = $1`, [a.orgId]);
    h.t.app.get((await import('../../src/policy/policies.service.js')).PoliciesService).forget(a.orgId);
    expect((await lookup()).body).toMatchObject({ status: 'blocked', errorCode: 'POLICY_BLOCKED' });
    const got = await h.t.http.get(`/v1/orgs/${a.orgId}/policies`).set(adminAuth);
    expect(got.status).toBe(200);
    expect(got.body.rules).toEqual(shownRules);
    expect(got.body.unusable).toEqual([expect.stringMatching(why), ...(got.body.unusable as string[]).slice(1, -1), 'every tool call of the org is blocked (POLICY_BLOCKED) until valid rules are PUT']);
  });

  it('valid rules: no `unusable`, and a PUT of valid rules makes the calls run again', async () => {
    const put = await h.t.http.put(`/v1/orgs/${a.orgId}/policies`).set(adminAuth).send({ rules: [{ id: 'r1', match: { toolName: 'order_lookup.*' }, decision: 'allow' }] });
    expect(put.status).toBe(200);
    expect(put.body).not.toHaveProperty('unusable');
    const got = await h.t.http.get(`/v1/orgs/${a.orgId}/policies`).set(adminAuth);
    expect(got.body).not.toHaveProperty('unusable');
    expect((await lookup()).body).toMatchObject({ status: 'succeeded' });
  });
});
