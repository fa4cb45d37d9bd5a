import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ShopifyEmulator } from '../../src/emulator/index.js';
import { JUMIO_ACCOUNT_IDS } from '../../src/emulator/jumio.emulator.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';
import { expectProblem } from './governance.helpers.js';

/**
 * README "Tools": policy rules "compare params as the vendor receives them", and a block rule cannot be walked around
 * by another spelling. A refund that leaves `currency` out is in the order's currency, which Shopify names only when
 * the call runs (buildRefundInput sends it), and a kyc call that leaves `accountId` out is asked under the account of
 * the org's credentials: the policy sees no value either way, so `currency eq USD → block` would let the same USD
 * refund through without its currency, and `currency ne USD → allow` would allow it. A PUT refuses an eq, ne or in
 * on such a param unless an exists condition on it comes first; the calls that leave it out get a rule of their own.
 */
describe('policy PUT: eq, ne and in on a param whose absence stands for a value the policy cannot see', () => {
  let h: Harness;
  let shop: ShopifyEmulator;
  beforeAll(async () => {
    h = await startHarness();
    shop = h.emu.vendor<ShopifyEmulator>('shopify');
  });
  afterAll(async () => {
    await h?.close();
  });

  const put = (org: OrgSetup, rules: unknown[]) => h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules });
  const versionOf = async (org: OrgSetup) => (await h.t.http.get(`/v1/orgs/${org.orgId}/policies`).set(adminAuth)).body.version as number;
  const refund = (org: OrgSetup, input: Record<string, unknown>) =>
    h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_refund', { action: 'create', ...input }));
  const refundsSentSince = (from: number) => h.emu.requests.slice(from).filter((r) => r.body.includes('refundCreate')).length;

  const REFUND_CURRENCY =
    'but a call of shopify_refund.create may leave currency out, and left out, the refund is in the order\'s currency, which the policy cannot see: ' +
    'the rule would judge such a call as if it had no currency (eq and in never hold, ne always does), though the vendor acts on one; ' +
    'put {"path": "currency", "op": "exists"} before it so the rule is for calls that name currency, ' +
    'and a separate rule with {"path": "currency", "op": "exists", "value": false} for those that leave it out';
  const GUARD = { path: 'currency', op: 'exists' };
  const LEFT_OUT = { id: 'currency-left-out', match: { toolName: 'shopify_refund.create', where: [{ path: 'currency', op: 'exists', value: false }] }, decision: 'require_expert_approval' };
  const OTHERS = { id: 'other-refunds', match: { toolName: 'shopify_refund.create' }, decision: 'allow' };

  const refused: [string, Record<string, unknown>, string][] = [
    [
      'a block on currency eq USD',
      { id: 'no-usd-refunds', match: { toolName: 'shopify_refund.create', where: [{ path: 'currency', op: 'eq', value: 'USD' }] }, decision: 'block' },
      `rules[0] ("no-usd-refunds"): where[0].path "currency" is compared (eq) ${REFUND_CURRENCY}`,
    ],
    [
      'an allow on currency ne USD',
      { id: 'non-usd-ok', match: { toolName: 'shopify_refund.create', where: [{ path: 'currency', op: 'ne', value: 'USD' }] }, decision: 'allow' },
      `rules[0] ("non-usd-ok"): where[0].path "currency" is compared (ne) ${REFUND_CURRENCY}`,
    ],
    [
      'USD refunds over 100 need an expert (currency in, after the amount)',
      {
        id: 'big-usd-refunds',
        match: { toolName: 'shopify_refund.*', where: [{ path: 'amount', op: 'gt', value: 100 }, { path: 'currency', op: 'in', value: ['USD'] }] },
        decision: 'require_expert_approval',
      },
      `rules[0] ("big-usd-refunds"): where[1].path "currency" is compared (in) ${REFUND_CURRENCY}`,
    ],
    [
      'an org-wide rule (no toolName reaches the refund too)',
      { id: 'usd-anywhere', match: { where: [{ path: 'currency', op: 'eq', value: 'USD' }] }, decision: 'block' },
      `rules[0] ("usd-anywhere"): where[0].path "currency" is compared (eq) ${REFUND_CURRENCY}`,
    ],
    [
      'a kyc rule on accountId',
      { id: 'not-this-user', match: { toolName: 'kyc.get_status', where: [{ path: 'accountId', op: 'eq', value: JUMIO_ACCOUNT_IDS.second }] }, decision: 'block' },
      'rules[0] ("not-this-user"): where[0].path "accountId" is compared (eq) but a call of kyc.get_status may leave accountId out, and left out, ' +
        'the account of the org\'s Jumio credentials is used, which the policy cannot see: the rule would judge such a call as if it had no accountId ' +
        '(eq and in never hold, ne always does), though the vendor acts on one; put {"path": "accountId", "op": "exists"} before it so the rule ' +
        'is for calls that name accountId, and a separate rule with {"path": "accountId", "op": "exists", "value": false} for those that leave it out',
    ],
  ];
  for (const [what, rule, message] of refused) {
    it(`refuses 400 VALIDATION_FAILED, naming the path, the action, what absence means and the guard: ${what}; the policy in force is unchanged`, async () => {
      const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
      const res = await put(org, [rule, OTHERS]);
      expectProblem(res, 400, 'VALIDATION_FAILED');
      expect(res.body.errors).toEqual([message]);
      expect(await versionOf(org)).toBe(0);
    });
  }

  it('accepts the same conditions after an exists guard on the same path, and a rule for the calls that leave it out', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const rules = [
      { id: 'no-usd-refunds', match: { toolName: 'shopify_refund.create', where: [GUARD, { path: 'currency', op: 'eq', value: 'USD' }] }, decision: 'block' },
      { id: 'non-usd-ok', match: { toolName: 'shopify_refund.create', where: [{ ...GUARD, value: true }, { path: 'currency', op: 'ne', value: 'USD' }] }, decision: 'allow' },
      { id: 'cad', match: { where: [GUARD, { path: 'currency', op: 'in', value: ['CAD'] }] }, decision: 'observe' },
      { id: 'kyc-second', match: { toolName: 'kyc.*', where: [{ path: 'accountId', op: 'exists' }, { path: 'accountId', op: 'eq', value: JUMIO_ACCOUNT_IDS.second }] }, decision: 'block' },
      LEFT_OUT,
      OTHERS,
    ];
    const res = await put(org, rules);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((res.body as { rules: unknown[] }).rules).toEqual(rules);
  });

  it('leaves rules on other params untouched: another tool, another refund param', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const rules = [
      { id: 'vip-order', match: { toolName: 'order_lookup.lookup', where: [{ path: 'orderId', op: 'eq', value: '12345' }] }, decision: 'observe' },
      { id: 'no-admin', match: { toolName: 'nango_proxy.get', where: [{ path: 'path', op: 'ne', value: '/v1/admin/users' }] }, decision: 'allow' },
      { id: 'watch-order', match: { toolName: 'shopify_refund.create', where: [{ path: 'orderId', op: 'in', value: ['12345'] }] }, decision: 'require_expert_approval' },
    ];
    const res = await put(org, rules);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });

  it('a block on USD refunds, guarded, with a rule for the refunds that leave currency out: the named USD refund is blocked, the unnamed one waits for an expert', async () => {
    const org = await setupOrg(h.t, {
      tools: ['shopify_refund.create'],
      rules: [
        { id: 'no-usd-refunds', match: { toolName: 'shopify_refund.create', where: [GUARD, { path: 'currency', op: 'eq', value: 'USD' }] }, decision: 'block' },
        LEFT_OUT,
        OTHERS,
      ],
    });
    const before = shop.refundCount(12345);
    const from = h.emu.requests.length;
    const named = await refund(org, { orderId: '12345', amount: '5.00', currency: 'USD' });
    expect([named.status, named.body.errorCode]).toEqual([403, 'POLICY_BLOCKED']);
    const unnamed = await refund(org, { orderId: '12345', amount: '5.00' });
    expect({ status: unnamed.body.status, refundsSent: refundsSentSince(from), refundsMade: shop.refundCount(12345) - before }, JSON.stringify(unnamed.body)).toEqual({
      status: 'waiting_approval',
      refundsSent: 0,
      refundsMade: 0,
    });
  });

  it('"USD refunds over 100 need an expert", guarded, with the same rule for the refunds that leave currency out: a 110.00 refund without currency waits', async () => {
    const org = await setupOrg(h.t, {
      tools: ['shopify_refund.create'],
      rules: [
        {
          id: 'big-usd-refunds',
          match: { toolName: 'shopify_refund.create', where: [GUARD, { path: 'currency', op: 'eq', value: 'USD' }, { path: 'amount', op: 'gt', value: 100 }] },
          decision: 'require_expert_approval',
        },
        LEFT_OUT,
        OTHERS,
      ],
    });
    const before = shop.refundCount(12345);
    const from = h.emu.requests.length;
    // Order 12345: a USD shop, paid in USD (120.00).
    const res = await refund(org, { orderId: '12345', amount: '110.00' });
    expect({ status: res.body.status, refundsSent: refundsSentSince(from), refundsMade: shop.refundCount(12345) - before }, JSON.stringify(res.body)).toEqual({
      status: 'waiting_approval',
      refundsSent: 0,
      refundsMade: 0,
    });
  });

  it('a policy stored before the check (currency eq USD, unguarded) is read as it is: a refund naming USD is still blocked', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const rules = [{ id: 'no-usd-refunds', match: { toolName: 'shopify_refund.create', where: [{ path: 'currency', op: 'eq', value: 'USD' }] }, decision: 'block' }, OTHERS];
    await h.t.ds.query(`INSERT INTO policies (org_id, rules, version, updated_at) VALUES ($1, $2::jsonb, 1, now())`, [org.orgId, JSON.stringify(rules)]);
    const named = await refund(org, { orderId: '12345', amount: '5.00', currency: 'USD' });
    expect([named.status, named.body.errorCode]).toEqual([403, 'POLICY_BLOCKED']);
    expect((await h.t.http.get(`/v1/orgs/${org.orgId}/policies`).set(adminAuth)).body.rules).toEqual(rules);
  });
});
