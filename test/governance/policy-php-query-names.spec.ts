import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * PHP (WordPress, WooCommerce, Magento behind the Nango proxy) registers a query member named include.deleted,
 * "include deleted" or include[deleted as $_GET['include_deleted']. A block on query.include_deleted must not be walked
 * around by those spellings: such a param fails closed, as another letter case or include_deleted[] does. Found by a
 * review of the policy language against its documentation.
 */
describe('a rule on a query member, and the names PHP reads as it', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('"include.deleted", "include deleted" and "include[deleted" are blocked like "include_deleted"', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.get'],
      vendors: ['nango'],
      rules: [
        { id: 'no-deleted', match: { toolName: 'nango_proxy.get', where: [{ path: 'query.include_deleted', op: 'eq', value: 'true' }] }, decision: 'block' },
        { id: 'ok', decision: 'allow' },
      ],
    });
    const answers: Record<string, unknown> = {};
    for (const name of ['include_deleted', 'include.deleted', 'include deleted', 'include[deleted']) {
      const res = await h.t.http
        .post(`/v1/runs/${org.runId}/tool-calls`)
        .set(bearer(org.agentKey))
        .send(toolUse('nango_proxy', { action: 'get', path: '/wp-json/wc/v3/orders', query: { [name]: 'true' } }));
      answers[name] = [res.status, res.body.status, res.body.errorCode];
    }
    expect(answers).toEqual({
      include_deleted: [403, 'blocked', 'POLICY_BLOCKED'],
      'include.deleted': [403, 'blocked', 'POLICY_BLOCKED'],
      'include deleted': [403, 'blocked', 'POLICY_BLOCKED'],
      'include[deleted': [403, 'blocked', 'POLICY_BLOCKED'],
    });
    // Other members are sent as written: a name PHP reads as another member is no clash.
    const other = await h.t.http
      .post(`/v1/runs/${org.runId}/tool-calls`)
      .set(bearer(org.agentKey))
      .send(toolUse('nango_proxy', { action: 'get', path: '/wp-json/wc/v3/orders', query: { 'per.page': '5', 'include[]': 'x', status: 'any' } }));
    expect([other.status, other.body.status]).toEqual([200, 'succeeded']);
  });
});
