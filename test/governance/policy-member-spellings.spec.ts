import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NangoEmulator } from '../../src/emulator/index.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * A policy path names a member exactly, but the Nango proxy sends the members of its free-form `body` and `query` as the
 * agent wrote them, and many providers read names leniently: Go's encoding/json and ASP.NET Core's binders in any letter
 * case, Rails, PHP and qs `include[]` as `include` and `refund[amount]` as a member of `refund`, MongoDB's $set and
 * lodash's set `refund.amount` so too, an NFKC-folding server fullwidth letters as plain ones. A second spelling of the
 * member walked round the rule (200 succeeded, the provider given it). Such a param now fails closed, blocked, as a value
 * spelt two ways is (policy-equality.ts); members the rule does not name pass as before.
 */
describe('policy rules against members spelt another way (the Nango proxy sends member names as written)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const call = (org: { runId: string; agentKey: string }, input: Record<string, unknown>) =>
    h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('nango_proxy', input));
  const amountRule = (where: unknown[]) => ({
    tools: ['nango_proxy.post'],
    vendors: ['nango' as const],
    rules: [
      { id: 'big-amounts', match: { toolName: 'nango_proxy.post', where }, decision: 'block' },
      { id: 'ok', decision: 'allow' },
    ],
  });

  it('a block on body.amount > 100: {"amount": 1, "Amount": 5000} and an exists-guarded {"AMOUNT": 5000} are blocked, nothing sent; other members pass', async () => {
    const nango = h.emu.vendor<NangoEmulator>('nango');
    const plain = await setupOrg(h.t, amountRule([{ path: 'body.amount', op: 'gt', value: 100 }]));
    const before = nango.posts.length;
    const twice = await call(plain, { action: 'post', path: '/v1/refunds', body: { amount: 1, Amount: 5000 } });
    expect([twice.status, twice.body.errorCode]).toEqual([403, 'POLICY_BLOCKED']);
    const [decision] = (await h.t.ds.query('SELECT d.rule_id, d.reason FROM tool_calls c JOIN policy_decisions d ON d.id = c.policy_decision_id WHERE c.id = $1', [
      twice.body.toolCallId,
    ])) as { rule_id: string; reason: string }[];
    expect(decision).toEqual({ rule_id: 'big-amounts', reason: expect.stringMatching(/could not be evaluated: .*a member the rule names spelt another way/) });
    const guarded = await setupOrg(h.t, amountRule([{ path: 'body.amount', op: 'exists' }, { path: 'body.amount', op: 'gt', value: 100 }]));
    const upper = await call(guarded, { action: 'post', path: '/v1/refunds', body: { AMOUNT: 5000 } });
    expect([upper.status, upper.body.errorCode]).toEqual([403, 'POLICY_BLOCKED']);
    expect(nango.posts.slice(before)).toEqual([]);
    // Members the rule does not name, bracketed ones included, go through as written.
    const fine = await call(plain, { action: 'post', path: '/v1/refunds', body: { amount: 50, currency: 'usd', 'metadata[note]': 'x', amounts: [1] } });
    expect([fine.status, fine.body.status]).toEqual([200, 'succeeded']);
    expect(nango.posts.slice(before).map((p) => p.body)).toEqual([{ amount: 50, currency: 'usd', 'metadata[note]': 'x', amounts: [1] }]);
  });

  it('a block on query.include eq "secrets": Include, INCLUDE, include[] and fullwidth ｉｎｃｌｕｄｅ are blocked too', async () => {
    const org = await setupOrg(h.t, {
      tools: ['nango_proxy.get'],
      vendors: ['nango'],
      rules: [
        { id: 'no-secrets', match: { toolName: 'nango_proxy.get', where: [{ path: 'query.include', op: 'eq', value: 'secrets' }] }, decision: 'block' },
        { id: 'ok', decision: 'allow' },
      ],
    });
    const answers: Record<string, unknown> = {};
    for (const name of ['include', 'Include', 'INCLUDE', 'include[]', '\uff49\uff4e\uff43\uff4c\uff55\uff44\uff45']) {
      const res = await call(org, { action: 'get', path: '/v1/users', query: { [name]: 'secrets' } });
      answers[name] = [res.status, res.body.errorCode];
    }
    expect(Object.values(answers)).toEqual(Array(5).fill([403, 'POLICY_BLOCKED']));
  });

  it('a dotted or bracketed name for a member inside the one a rule walks through is blocked', async () => {
    const org = await setupOrg(h.t, amountRule([{ path: 'body.refund.amount', op: 'exists' }, { path: 'body.refund.amount', op: 'gt', value: 100 }]));
    for (const body of [{ 'refund.amount': 5000 }, { 'refund[amount]': 5000 }, { refund: { amount: 1 }, 'Refund.amount': 5000 }]) {
      const res = await call(org, { action: 'post', path: '/v1/orders/1', body });
      expect([res.status, res.body.errorCode], JSON.stringify(body)).toEqual([403, 'POLICY_BLOCKED']);
    }
  });
});
