import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NangoEmulator } from '../../src/emulator/index.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * One number spelt two ways (12 and "0012", 100 and "100.00") may be one value to the vendor or two: whichever a
 * rule assumed, an allow-list (ne/in) or a block (eq) could be walked around by the other spelling, so the rule
 * cannot be evaluated and blocks (README, "Policy rules"). Before, the number 12 passed an allow-list of "0012".
 */
describe('policy rules and one number spelt two ways (Nango query and body)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a block rule "query.account ne 0012" blocks a call whose query sends account=12', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.get'],
      vendors: ['nango'],
      rules: [
        { id: 'only-0012', match: { toolName: 'nango_proxy.get', where: [{ path: 'query.account', op: 'ne', value: '0012' }] }, decision: 'block' },
      ],
    });
    const nango = h.emu.vendor<NangoEmulator>('nango');
    const send = (query: Record<string, unknown>) =>
      h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('nango_proxy', { action: 'get', path: '/v1/accounts', query }));
    // sanity: the text "12" is blocked, the text "0012" is allowed
    expect((await send({ account: '12' })).body.errorCode).toBe('POLICY_BLOCKED');
    expect((await send({ account: '0012' })).body.status).toBe('succeeded');
    const before = nango.upstreamRequests.length;
    const res = await send({ account: 12 });
    const sent = nango.upstreamRequests.slice(before).map((r) => r.path);
    expect({ status: res.body.status, errorCode: res.body.errorCode, resultQuery: res.body.result?.query, sent }).toEqual({
      status: 'blocked', errorCode: 'POLICY_BLOCKED', resultQuery: undefined, sent: [],
    });
  });

  it('an allow-list "query.account in [0012]" then "block nango_proxy.get" does not let account=12 through', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.get'],
      vendors: ['nango'],
      rules: [
        { id: 'allow-0012', match: { toolName: 'nango_proxy.get', where: [{ path: 'query.account', op: 'in', value: ['0012'] }] }, decision: 'allow' },
        { id: 'no-other', match: { toolName: 'nango_proxy.get' }, decision: 'block' },
      ],
    });
    const res = await h.t.http
      .post(`/v1/runs/${org.runId}/tool-calls`)
      .set(bearer(org.agentKey))
      .send(toolUse('nango_proxy', { action: 'get', path: '/v1/accounts', query: { account: 12 } }));
    expect({ status: res.body.status, errorCode: res.body.errorCode, sentAccount: res.body.result?.query?.account }).toEqual({
      status: 'blocked', errorCode: 'POLICY_BLOCKED', sentAccount: undefined,
    });
    const row = (await h.t.ds.query('SELECT d.rule_id, d.reason FROM tool_calls c JOIN policy_decisions d ON d.id = c.policy_decision_id WHERE c.id = $1', [res.body.toolCallId])) as { rule_id: string; reason: string }[];
    expect(row[0].rule_id).toBe('allow-0012');
    expect(row[0].reason).toMatch(/could not be evaluated: .*one number spelt two ways/);
  });

  it('a Nango post: "body.account ne 0012 → block" then allow posts, does not let body {account: 12} through (the provider gets the number 12)', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.post'],
      vendors: ['nango'],
      rules: [
        { id: 'only-0012', match: { toolName: 'nango_proxy.post', where: [{ path: 'body.account', op: 'ne', value: '0012' }] }, decision: 'block' },
        { id: 'posts-ok', match: { toolName: 'nango_proxy.post' }, decision: 'allow' },
      ],
    });
    const nango = h.emu.vendor<NangoEmulator>('nango');
    const before = nango.appliedPosts;
    const res = await h.t.http
      .post(`/v1/runs/${org.runId}/tool-calls`)
      .set(bearer(org.agentKey))
      .send(toolUse('nango_proxy', { action: 'post', path: '/v1/transfers', body: { account: 12 } }));
    expect({ status: res.body.status, errorCode: res.body.errorCode, postsApplied: nango.appliedPosts - before }).toEqual({
      status: 'blocked', errorCode: 'POLICY_BLOCKED', postsApplied: 0,
    });
  });

  it('a Nango post: "body.amount eq 100 → block" blocks "100.00" too, and lets other amounts through', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.post'],
      vendors: ['nango'],
      rules: [
        { id: 'not-100', match: { toolName: 'nango_proxy.post', where: [{ path: 'body.amount', op: 'eq', value: 100 }] }, decision: 'block' },
        { id: 'posts-ok', match: { toolName: 'nango_proxy.post' }, decision: 'allow' },
      ],
    });
    const post = (amount: unknown) =>
      h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('nango_proxy', { action: 'post', path: '/v1/transfers', body: { amount } }));
    for (const amount of [100, '100', '100.00', '0100']) expect((await post(amount)).body.errorCode, String(amount)).toBe('POLICY_BLOCKED');
    for (const amount of [99, '99.00', 'abc']) expect((await post(amount)).body.status, String(amount)).toBe('succeeded');
  });

  it('a PUT refuses a comparison some matched action can never evaluate (it would block them all), and takes it behind an exists guard', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
    const put = (where: unknown[]) =>
      h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(bearer(org.adminKey)).send({ rules: [{ id: 'big', match: { where }, decision: 'block' }] });
    const refused = await put([{ path: 'amount', op: 'gt', value: 1000 }]);
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/where\[0\]\.path "amount" is compared \(gt\) but is never present in a call of [a-z_.]+(, [a-z_.]+)* and \d+ more: /);
    expect((await put([{ path: 'amount', op: 'exists' }, { path: 'amount', op: 'gt', value: 1000 }])).status).toBe(200);
    const lookup = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(lookup.body.status).toBe('succeeded');
  });
});
