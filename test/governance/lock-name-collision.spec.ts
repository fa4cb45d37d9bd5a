import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitsOnLock } from '../support/lock-waits.js';
import { CREDENTIALS, shopDomainOf, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { callBeingRecorded } from './governance.helpers.js';

/**
 * The org's flag and policy locks, the key locks and the credentials locks were pg_advisory_xact_lock(hashtext(name)):
 * one 32-bit hash of the name. Two orgs whose names hashed alike shared one lock, so org B's tool calls queued behind
 * org A's kill switch, and B's kill switch waited for A's calls in flight (every call takes its org's locks shared
 * since the fair locks). With some tens of thousands of lock names in a deployment such a pair is expected (the
 * birthday bound), and a platform admin may pick one with an org id. Locks are now keyed by 64 bits
 * (src/db/advisory-locks.ts). The pair here collides under hashtext, found by a birthday search over random org ids.
 */
describe('advisory lock names of unrelated orgs that hash alike', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const collidingOrgIds = async (t: TestApp): Promise<[string, string]> => {
    const q = t.ds.createQueryRunner();
    await q.connect();
    try {
      await q.startTransaction();
      await q.query(`SET LOCAL work_mem = '256MB'`);
      const [row] = (await q.query(
        `SELECT (array_agg(u))[1:2] AS pair FROM (SELECT u, hashtext('flag:' || u::text || ':tool_calling_enabled') x
           FROM (SELECT gen_random_uuid() u FROM generate_series(1, 300000)) c) h GROUP BY x HAVING count(*) > 1 LIMIT 1`,
      )) as { pair: string[] }[];
      await q.commitTransaction();
      return [row.pair[0], row.pair[1]];
    } finally {
      await q.release();
    }
  };

  const setupOrgWithId = async (t: TestApp, orgId: string): Promise<{ orgId: string; agentKey: string; runId: string }> => {
    const ok = (res: { status: number; body: unknown }, what: string) => {
      if (res.status >= 300) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
    };
    ok(await t.http.post('/v1/orgs').set(adminAuth).send({ name: 'Collide', id: orgId }), 'org');
    const agent = await createKey(t, orgId, 'agent');
    ok(await t.http.put(`/v1/orgs/${orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: true }), 'flag');
    ok(await t.http.put(`/v1/orgs/${orgId}/tool-permissions`).set(adminAuth).send({ items: [{ toolName: 'order_lookup', action: 'lookup', specialistId: null, enabled: true }] }), 'perms');
    ok(await t.http.put(`/v1/orgs/${orgId}/integrations/shopify/credentials`).set(adminAuth).send({ config: { ...CREDENTIALS.shopify, shopDomain: shopDomainOf(orgId) } }), 'creds');
    const run = await t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: 'support' });
    ok(run, 'run');
    return { orgId, agentKey: agent.key, runId: (run.body as { id: string }).id };
  };

  const within = <T>(p: Promise<T>, ms: number): Promise<'answered' | 'still waiting'> =>
    Promise.race([p.then(() => 'answered' as const), new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), ms))]);

  it("org B's tool call does not wait behind org A's kill switch", async () => {
    for (let round = 0; round < 2; round++) {
      const [a, b] = await collidingOrgIds(h.t);
      await setupOrgWithId(h.t, a);
      const orgB = await setupOrgWithId(h.t, b);
      const held = await callBeingRecorded(h.t, a); // a call of org A being recorded
      const off = h.t.http.put(`/v1/orgs/${a}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false, reason: 'incident at A' }).then((r) => r);
      await waitFor(() => waitsOnLock(h.t.ds, '%pg_advisory_xact_lock%'), "A's kill switch waiting for A's call"); // as designed
      const call = h.t.http.post(`/v1/runs/${orgB.runId}/tool-calls`).set(bearer(orgB.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '450789469' })).then((r) => r);
      const state = await within(call, 2_000);
      await held.done();
      expect((await off).status).toBe(200);
      const answer = await call;
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      expect(state, `round ${round}: org B's call (${b}) waited for org A's (${a}) kill switch and A's calls in flight`).toBe('answered');
    }
  });

  it("org B's kill switch does not wait for org A's calls in flight", async () => {
    for (let round = 0; round < 2; round++) {
      const [a, b] = await collidingOrgIds(h.t);
      await setupOrgWithId(h.t, a);
      await setupOrgWithId(h.t, b);
      const held = await callBeingRecorded(h.t, a);
      const off = h.t.http.put(`/v1/orgs/${b}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false, reason: 'incident at B' }).then((r) => r);
      const state = await within(off, 2_000);
      await held.done();
      expect((await off).status).toBe(200);
      expect(state, `round ${round}: org B's kill switch (${b}) waited for a call of org A (${a})`).toBe('answered');
    }
  });
});
