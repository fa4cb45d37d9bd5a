import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blockedNeverStartedCheck } from '../../bench/gateway-bench.checks.js';
import { blockedCallStats, type RowQuery } from '../../bench/gateway-bench.ledger.js';
import { BLOCK_RULE, BLOCKED } from '../../bench/gateway-bench.setup.js';
import { bearer } from '../support/test-app.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';

/**
 * The benchmark's "blocked: no vendor call" check reads the ledger with
 * blockedCallStats: here on the real schema, against a gateway with the
 * benchmark's block rule, for the blocked tool (nothing started) and for an
 * allowed one (started: what the check must catch).
 */
describe('bench: blocked calls on the ledger', () => {
  let h: Harness;
  let org: OrgSetup;
  let query: RowQuery;

  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_query.get_product'], rules: [BLOCK_RULE] });
    query = (sql, params) => h.t.ds.query(sql, params) as Promise<Record<string, unknown>[]>;
    const post = (use: object) => h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(use);
    for (let i = 0; i < 2; i++) {
      const blocked = await post(toolUse(BLOCKED.name, BLOCKED.input));
      expect(blocked.status).toBe(403);
      expect((blocked.body as { errorCode: string }).errorCode).toBe('POLICY_BLOCKED');
    }
    const allowed = await post(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(allowed.status).toBe(200);
  });

  afterAll(async () => {
    await h?.close();
  });

  it('counts the blocked rows of the blocked tool, none started, and the check passes', async () => {
    const stats = await blockedCallStats(query, org.orgId, BLOCKED.name, BLOCKED.input.action);
    expect(stats).toEqual({ rows: 2, notBlocked: 0, started: 0, startedEvents: 0 });
    expect(blockedNeverStartedCheck(stats, 2).met).toBe(true);
  });

  it('sees a call that was started toward its vendor, and the check fails on it', async () => {
    const stats = await blockedCallStats(query, org.orgId, 'order_lookup', 'lookup');
    expect(stats).toEqual({ rows: 1, notBlocked: 1, started: 1, startedEvents: 1 });
    expect(blockedNeverStartedCheck(stats, 1).met).toBe(false);
  });

  it("counts only the org's own rows", async () => {
    const other = await setupOrg(h.t, { tools: ['shopify_query.get_product'], rules: [BLOCK_RULE] });
    expect(await blockedCallStats(query, other.orgId, BLOCKED.name, BLOCKED.input.action)).toEqual({ rows: 0, notBlocked: 0, started: 0, startedEvents: 0 });
  });
});
