import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NangoEmulator } from '../../src/emulator/index.js';
import { JUMIO_EXECUTION_IDS } from '../../src/emulator/jumio.emulator.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

/**
 * The gateway rewrites some params into one spelling before the policy runs (a Nango path gets its leading "/"
 * and upper-case hex, a Jumio id is lower-cased), while a rule keeps the value as the admin typed it. The rule's
 * value is compared in the params' spelling, whatever the rule's toolName ("tool.action", "tool.*" or none);
 * and a Nango query value, sent as text, matches a rule on the same text (false and "false").
 */
describe('policy rules compare their values in the spelling the params are sent in', () => {
  let h: Harness;
  let nango: NangoEmulator;
  beforeAll(async () => {
    h = await startHarness();
    nango = h.emu.vendor<NangoEmulator>('nango');
  });
  afterAll(async () => {
    await h?.close();
  });

  const call = (org: OrgSetup, tool: string, input: Record<string, unknown>) =>
    h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse(tool, input));
  const outcome = (res: { status: number; body: { status: string; errorCode: string | null } }) => [res.status, res.body.status, res.body.errorCode];
  const BLOCKED = [403, 'blocked', 'POLICY_BLOCKED'];
  const SUCCEEDED = [200, 'succeeded', null];
  const upstreamPathsSince = (from: number) => nango.upstreamRequests.slice(from).map((r) => r.path);

  it('a Nango path rule written relative ("v1/admin/users", under nango_proxy.*) blocks that path in every spelling, for get and post; other paths go through', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.get', 'nango_proxy.post'],
      vendors: ['nango'],
      rules: [
        { id: 'no-admin', match: { toolName: 'nango_proxy.*', where: [{ path: 'path', op: 'eq', value: 'v1/admin/users' }] }, decision: 'block' },
        { id: 'posts-ok', match: { toolName: 'nango_proxy.post' }, decision: 'allow' },
      ],
    });
    const from = nango.upstreamRequests.length;
    for (const path of ['v1/admin/users', '/v1/admin/users', '/v1/admin/users/']) {
      expect(outcome(await call(org, 'nango_proxy', { action: 'get', path })), `get ${path}`).toEqual(BLOCKED);
    }
    // A post's params are valid only with its body: the rule's value is canonicalised within the call's own params.
    expect(outcome(await call(org, 'nango_proxy', { action: 'post', path: 'v1/admin/users', body: { role: 'owner' } }))).toEqual(BLOCKED);
    expect(upstreamPathsSince(from)).toEqual([]);

    expect(outcome(await call(org, 'nango_proxy', { action: 'get', path: 'v1/admin/users2' }))).toEqual(SUCCEEDED);
    expect(outcome(await call(org, 'nango_proxy', { action: 'get', path: 'v1/admin' }))).toEqual(SUCCEEDED);
    expect(upstreamPathsSince(from)).toEqual(['/v1/admin/users2', '/v1/admin']);
  });

  it('a Nango path rule with lower-case percent-encoding blocks that path in either case of hex; another character is another path', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.get'],
      vendors: ['nango'],
      rules: [{ id: 'no-cafe', match: { toolName: 'nango_proxy.get', where: [{ path: 'path', op: 'in', value: ['/v1/search/caf%c3%a9'] }] }, decision: 'block' }],
    });
    const from = nango.upstreamRequests.length;
    for (const path of ['/v1/search/caf%c3%a9', 'v1/search/caf%C3%A9']) {
      expect(outcome(await call(org, 'nango_proxy', { action: 'get', path })), path).toEqual(BLOCKED);
    }
    expect(nango.upstreamRequests.length - from).toBe(0);
    expect(outcome(await call(org, 'nango_proxy', { action: 'get', path: '/v1/search/caf%c3%a8' }))).toEqual(SUCCEEDED); // è, not é
    expect(nango.upstreamRequests.length - from).toBe(1);
  });

  it('a Jumio rule with the id in upper case (a rule with no toolName) blocks that id in either case; another id goes through', async () => {
    const org = await setupOrg(h.t, {
      tools: ['kyc.get_status'],
      vendors: ['jumio'],
      rules: [{ id: 'not-this-person', match: { where: [{ path: 'workflowExecutionId', op: 'eq', value: JUMIO_EXECUTION_IDS.processed.toUpperCase() }] }, decision: 'block' }],
    });
    const sent = () => h.emu.count({ vendor: 'jumio', path: /workflow-executions/ });
    const before = sent();
    for (const id of [JUMIO_EXECUTION_IDS.processed.toUpperCase(), JUMIO_EXECUTION_IDS.processed]) {
      expect(outcome(await call(org, 'kyc', { action: 'get_status', workflowExecutionId: id })), id).toEqual(BLOCKED);
    }
    expect(sent() - before).toBe(0);
    const other = await call(org, 'kyc', { action: 'get_status', workflowExecutionId: JUMIO_EXECUTION_IDS.initiated.toUpperCase() });
    expect(outcome(other)).toEqual(SUCCEEDED);
    expect(sent() - before).toBe(1);
  });

  it('a Nango query rule matches the same text however it is typed (false and "false"; "true" and true); other values go through', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.get'],
      vendors: ['nango'],
      rules: [
        { id: 'no-live', match: { toolName: 'nango_proxy.get', where: [{ path: 'query.dryRun', op: 'eq', value: false }] }, decision: 'block' },
        { id: 'no-force', match: { toolName: 'nango_proxy.get', where: [{ path: 'query.force', op: 'in', value: ['true'] }] }, decision: 'block' },
      ],
    });
    const get = (query: Record<string, unknown>) => call(org, 'nango_proxy', { action: 'get', path: '/v1/customers/42', query });
    const from = nango.upstreamRequests.length;
    for (const query of [{ dryRun: false }, { dryRun: 'false' }, { force: true }, { force: 'true' }]) {
      expect(outcome(await get(query)), JSON.stringify(query)).toEqual(BLOCKED);
    }
    expect(nango.upstreamRequests.length - from).toBe(0);
    for (const query of [{ dryRun: true }, { dryRun: 'true' }, { force: false }]) {
      const res = await get(query);
      expect(outcome(res), JSON.stringify(query)).toEqual(SUCCEEDED);
      // What the provider saw: the same text, whichever type the model used.
      expect((res.body as { result: { query: Record<string, string> } }).result.query).toEqual(Object.fromEntries(Object.entries(query).map(([k, v]) => [k, String(v)])));
    }
    expect(nango.upstreamRequests.length - from).toBe(3);
  });

  it('a rule value no call can carry is refused when saved (a block on it would never apply); written as calls spell it, it blocks the call', async () => {
    const cases: { tool: string; param: string; never: string; written: string; input: Record<string, unknown>; vendor: 'nango' | 'shopify' }[] = [
      // A call can only name these paths percent-encoded: the raw spelling is refused, not rewritten.
      { tool: 'nango_proxy.get', param: 'path', never: '/v1/search/café', written: '/v1/search/caf%C3%A9', input: { action: 'get', path: 'v1/search/caf%C3%A9' }, vendor: 'nango' },
      { tool: 'nango_proxy.get', param: 'path', never: '/v1/files/my report', written: '/v1/files/my%20report', input: { action: 'get', path: '/v1/files/my%20report' }, vendor: 'nango' },
      // Shopify reads "012345" as order 12345, but a call must spell it "12345"; a currency is upper case.
      { tool: 'shopify_refund.create', param: 'orderId', never: '012345', written: '12345', input: { action: 'create', orderId: '12345', amount: '1.00' }, vendor: 'shopify' },
      { tool: 'shopify_refund.create', param: 'currency', never: 'usd', written: 'USD', input: { action: 'create', orderId: '12345', amount: '1.00', currency: 'USD' }, vendor: 'shopify' },
    ];
    for (const c of cases) {
      const org = await setupOrg(h.t, { tools: [c.tool], vendors: [c.vendor] });
      // A refund that leaves currency out is in the order's currency, which the policy cannot see: a rule on currency
      // says first that it is for the calls naming one.
      const guard = c.param === 'currency' ? [{ path: c.param, op: 'exists' }] : [];
      const rules = (value: string) => [
        { id: 'blocked', match: { toolName: c.tool, where: [...guard, { path: c.param, op: 'eq', value }] }, decision: 'block' },
        { id: 'otherwise-ok', match: { toolName: c.tool }, decision: 'allow' },
      ];
      const refused = await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules: rules(c.never) });
      expect([refused.status, refused.body.code], c.never).toEqual([400, 'VALIDATION_FAILED']);
      expect(refused.body.detail).toMatch(new RegExp(`^rules\\[0\\] \\("blocked"\\): where\\[${guard.length}\\]\\.value can never match ${c.param}: `));
      expect((await h.t.http.get(`/v1/orgs/${org.orgId}/policies`).set(adminAuth)).body.version, c.never).toBe(0);

      const saved = await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules: rules(c.written) });
      expect(saved.status, c.written).toBe(200);
      const sent = h.emu.count({ vendor: c.vendor });
      expect(outcome(await call(org, c.tool.split('.')[0], c.input)), c.written).toEqual(BLOCKED);
      expect(h.emu.count({ vendor: c.vendor }), c.written).toBe(sent);
    }
  });

  it('a rule value that equals a call\'s param in another spelling is saved, and holds: an amount by value, an id written as a number', async () => {
    const org = await setupOrg(h.t, {
      tools: ['shopify_refund.create'],
      rules: [
        { id: 'not-this-amount', match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'in', value: ['10.5000', 7] }] }, decision: 'block' },
        { id: 'not-this-order', match: { toolName: 'shopify_refund.create', where: [{ path: 'orderId', op: 'eq', value: 4242 }] }, decision: 'block' },
      ],
    });
    const refund = (orderId: string, amount: string) => call(org, 'shopify_refund', { action: 'create', orderId, amount });
    for (const [orderId, amount] of [['12345', '10.50'], ['12345', '7.00'], ['4242', '1.00']]) {
      expect(outcome(await refund(orderId, amount)), `${orderId} ${amount}`).toEqual(BLOCKED);
    }
  });

  it('a batch is judged the same way: the relative-path rule blocks its item, the other item runs', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.get'],
      vendors: ['nango'],
      rules: [{ id: 'no-admin', match: { toolName: 'nango_proxy.get', where: [{ path: 'path', op: 'eq', value: 'v1/admin/users' }] }, decision: 'block' }],
    });
    const from = nango.upstreamRequests.length;
    const res = await h.t.http
      .post(`/v1/runs/${org.runId}/tool-calls:batch`)
      .set(bearer(org.agentKey))
      .send({ toolUses: [toolUse('nango_proxy', { action: 'get', path: 'v1/admin/users' }), toolUse('nango_proxy', { action: 'get', path: 'v1/customers/42' })] });
    expect(res.status).toBe(200);
    expect((res.body as { results: { status: string; errorCode: string | null }[] }).results.map((r) => [r.status, r.errorCode])).toEqual([
      ['blocked', 'POLICY_BLOCKED'],
      ['succeeded', null],
    ]);
    expect(upstreamPathsSince(from)).toEqual(['/v1/customers/42']);
  });
  // A rule that can never hold is refused when saved, like a misspelt name: saved, a block on it fails open silently.
  const NEVER: [string, unknown, string][] = [
    ['a riskLevel the named action does not have (it is compared with the catalog risk)', { toolName: 'shopify_refund.create', riskLevel: 'medium' }, 'match.riskLevel "medium" can never match'],
    ['tool.* with a riskLevel none of its actions has', { toolName: 'shopify_refund.*', riskLevel: 'low' }, 'match.riskLevel "low" can never match'],
    ['in with an empty list', { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'in', value: [] }] }, 'must hold at least one value for in'],
    ['a param no action of the riskLevel takes', { riskLevel: 'low', where: [{ path: 'amount', op: 'eq', value: '500.00' }] }, 'where[0].path "amount" is never present'],
    ['a path below a text param', { toolName: 'shopify_refund.create', where: [{ path: 'amount.value', op: 'eq', value: '500.00' }] }, 'where[0].path "amount.value" is never present'],
  ];
  for (const [what, match, message] of NEVER) {
    it(`refuses (400 VALIDATION_FAILED) a block rule that can never hold: ${what}; the policy in force is unchanged`, async () => {
      const org = await setupOrg(h.t, { tools: ['shopify_refund.create'], rules: [{ id: 'keep', match: { toolName: 'shopify_refund.create' }, decision: 'block' }] });
      const put = await h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules: [{ id: 'stop-refunds', match, decision: 'block' }] });
      expect([put.status, put.body.code], JSON.stringify(put.body)).toEqual([400, 'VALIDATION_FAILED']);
      expect((put.body as { errors: string[] }).errors.join('\n')).toContain(message);
      const got = await h.t.http.get(`/v1/orgs/${org.orgId}/policies`).set(adminAuth);
      expect((got.body as { rules: { id: string }[] }).rules.map((r) => r.id)).toEqual(['keep']);
    });
  }

  it('a policy saved before these checks (an empty in, accepted then) is still read: calls it never concerned go through', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_query.get_product'], vendors: ['shopify'] });
    const rules = [{ id: 'refund-watchlist', match: { toolName: 'shopify_refund.create', where: [{ path: 'orderId', op: 'in', value: [] }] }, decision: 'block' }];
    await h.t.ds.query(`INSERT INTO policies (org_id, rules, version, updated_at) VALUES ($1, $2::jsonb, 1, now())`, [org.orgId, JSON.stringify(rules)]);
    expect(outcome(await call(org, 'shopify_query', { action: 'get_product', productId: '632910392' }))).toEqual(SUCCEEDED);
  });

  it('the same block with the riskLevel the action has is saved and blocks the refund', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const put = await h.t.http
      .put(`/v1/orgs/${org.orgId}/policies`)
      .set(adminAuth)
      .send({ rules: [{ id: 'stop-refunds', match: { toolName: 'shopify_refund.create', riskLevel: 'high' }, decision: 'block' }] });
    expect(put.status).toBe(200);
    expect(outcome(await call(org, 'shopify_refund', { action: 'create', orderId: '1001', amount: '500.00' }))).toEqual(BLOCKED);
  });
});
