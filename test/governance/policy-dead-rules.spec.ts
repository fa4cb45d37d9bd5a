import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JUMIO_EXECUTION_IDS } from '../../src/emulator/jumio.emulator.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';
import { expectProblem } from './governance.helpers.js';

/**
 * README "Tools": a PUT refuses a rule that cannot work as written. A gt/gte/lt/lte on a param some matched action
 * takes but never as a number (Amazon's 3-7-7 orderId, a currency code, a boolean) could not be evaluated for any of
 * its calls, so it would block them all whatever the rule decides, an allow rule included: an outage. An
 * `exists: false` on a param every call holds once the gateway filled in its defaults (kyc `includeDetails`, "left
 * out, the policy and ledger see it as true") or that the schema requires never matches: a block on it fails open.
 * Only new rules are checked: a policy stored before is read as it is.
 */
describe('policy PUT: rules that could never work as written', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const put = async (rules: unknown[]) => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    return h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).send({ rules });
  };

  const neverNumeric: [string, Record<string, unknown>, RegExp][] = [
    [
      'Amazon orderId (3-7-7 digits) gte 100, an allow rule',
      { id: 'amz-allow', match: { toolName: 'amazon_query.get_order', where: [{ path: 'orderId', op: 'gte', value: 100 }] }, decision: 'allow' },
      /^rules\[0\] \("amz-allow"\): where\[0\]\.path "orderId" is compared \(gte\) but never holds a number or a decimal text in a call of amazon_query\.get_order /,
    ],
    [
      'refund currency (^[A-Z]{3}$) gt 1, even after an exists guard',
      { id: 'cur', match: { toolName: 'shopify_refund.create', where: [{ path: 'currency', op: 'exists' }, { path: 'currency', op: 'gt', value: 1 }] }, decision: 'allow' },
      /^rules\[0\] \("cur"\): where\[1\]\.path "currency" is compared \(gt\) but never holds a number or a decimal text in a call of shopify_refund\.create /,
    ],
    [
      'kyc includeDetails (a boolean) lt 1',
      { id: 'kyc', match: { toolName: 'kyc.get_status', where: [{ path: 'includeDetails', op: 'lt', value: 1 }] }, decision: 'allow' },
      /^rules\[0\] \("kyc"\): where\[0\]\.path "includeDetails" is compared \(lt\) but never holds a number or a decimal text in a call of kyc\.get_status /,
    ],
    [
      'orderId gt 1000 on every catalog action: it would block every Amazon order lookup',
      { id: 'any-order', match: { where: [{ path: 'orderId', op: 'exists' }, { path: 'orderId', op: 'gt', value: 1000 }] }, decision: 'block' },
      /^rules\[0\] \("any-order"\): where\[1\]\.path "orderId" is compared \(gt\) but never holds a number or a decimal text in a call of amazon_query\.get_order\b/,
    ],
  ];
  for (const [what, rule, mentions] of neverNumeric) {
    it(`refuses 400 VALIDATION_FAILED a numeric comparison on a param that never holds a number, naming the rule and path: ${what}`, async () => {
      const res = await put([rule]);
      expectProblem(res, 400, 'VALIDATION_FAILED');
      expect(res.body.errors).toHaveLength(1);
      expect(res.body.errors[0]).toMatch(mentions);
      expect(res.body.errors[0]).toContain('would block them');
    });
  }

  it('accepts a numeric comparison on a string param that can hold a decimal text (refund amount, guarded; a Shopify order id of digits)', async () => {
    const rules = [
      { id: 'big-refunds', match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'exists' }, { path: 'amount', op: 'gt', value: 100 }] }, decision: 'require_expert_approval' },
      { id: 'new-orders', match: { toolName: 'order_lookup.lookup', where: [{ path: 'orderId', op: 'gte', value: '1000' }] }, decision: 'allow' },
    ];
    const res = await put(rules);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((res.body as { rules: { id: string }[] }).rules.map((r) => r.id)).toEqual(['big-refunds', 'new-orders']);
  });

  const alwaysHeld: [string, Record<string, unknown>, RegExp][] = [
    [
      'kyc includeDetails, filled in with its default (true) when a call leaves it out',
      { id: 'kyc-explicit', match: { toolName: 'kyc.get_status', where: [{ path: 'includeDetails', op: 'exists', value: false }] }, decision: 'block', reason: 'say includeDetails' },
      /^rules\[0\] \("kyc-explicit"\): where\[0\]\.path "includeDetails" always holds a value in every call of kyc\.get_status \(left out, it is filled in with its default before the policy runs\)/,
    ],
    [
      'Amazon orderId, which the schema requires',
      { id: 'no-order', match: { toolName: 'amazon_query.*', where: [{ path: 'orderId', op: 'exists', value: false }] }, decision: 'block' },
      /^rules\[0\] \("no-order"\): where\[0\]\.path "orderId" always holds a value in every call of any amazon_query action \(it is required\)/,
    ],
  ];
  for (const [what, rule, mentions] of alwaysHeld) {
    it(`refuses 400 VALIDATION_FAILED exists:false on a param every call holds (it never matches: a block fails open): ${what}`, async () => {
      const res = await put([rule]);
      expectProblem(res, 400, 'VALIDATION_FAILED');
      expect(res.body.errors).toHaveLength(1);
      expect(res.body.errors[0]).toMatch(mentions);
    });
  }

  it('accepts exists:false on a param a call may leave out with no default (refund currency)', async () => {
    const rule = { id: 'shop-currency', match: { toolName: 'shopify_refund.create', where: [{ path: 'currency', op: 'exists', value: false }, { path: 'amount', op: 'gt', value: 50 }] }, decision: 'require_expert_approval' };
    const res = await put([rule]);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });

  it('a policy stored before these checks is still read as it is: a call no rule can stop goes through', async () => {
    const org = await setupOrg(h.t, { tools: ['kyc.get_status'], vendors: ['jumio'] });
    const rules = [
      { id: 'amz-allow', match: { toolName: 'amazon_query.get_order', where: [{ path: 'orderId', op: 'gte', value: 100 }] }, decision: 'allow' },
      { id: 'kyc-explicit', match: { toolName: 'kyc.get_status', where: [{ path: 'includeDetails', op: 'exists', value: false }] }, decision: 'block' },
    ];
    await h.t.ds.query(`INSERT INTO policies (org_id, rules, version, updated_at) VALUES ($1, $2::jsonb, 1, now())`, [org.orgId, JSON.stringify(rules)]);
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey))
      .send(toolUse('kyc', { action: 'get_status', workflowExecutionId: JUMIO_EXECUTION_IDS.processed }));
    expect([res.status, res.body.status], JSON.stringify(res.body)).toEqual([200, 'succeeded']);
  });
});
