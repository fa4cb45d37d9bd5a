import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { approvalFor, refundUse } from './support.js';

/**
 * What an expert needs to decide, from a review of the approver's view: who asked and under which rule (the view had
 * no asking key, specialist or rule, and an expert key can read neither the run nor its calls); whether a rejection was
 * an expert's or the run ended by its agent (both read `rejected`); and where the input may be drawn otherwise than it
 * runs — inputShownExactly is true for bytes that run as shown, but "\u202E00.009" draws as 900.00, "amount" and
 * "amount\u200B" draw as one member, a Cyrillic "а" reads as Latin.
 */
describe("the approver's view: who asked, under which rule, who decided, and what may be drawn otherwise", () => {
  let h: Harness;
  let org: OrgSetup;
  let expert: string;
  let agent: { key: string; id: string };
  let runId: string;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, {
      tools: ['shopify_refund.create', 'nango_proxy.post'],
      vendors: ['shopify', 'nango'],
      rules: [{ id: 'refunds-need-an-expert', match: { toolName: 'shopify_refund.create' }, decision: 'require_expert_approval', reason: 'refunds are checked' }],
    });
    expert = (await createKey(h.t, org.orgId, 'expert')).key;
    agent = await createKey(h.t, org.orgId, 'agent');
    runId = (await h.t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: 'refund-desk' })).body.id as string;
  }, 90_000);
  afterAll(async () => {
    await h?.close();
  });

  const ask = async (use: ReturnType<typeof toolUse>, run = runId, key = agent.key) => {
    const call = await h.t.http.post(`/v1/runs/${run}/tool-calls`).set(bearer(key)).send(use);
    expect(call.status, JSON.stringify(call.body)).toBe(202);
    const listed = await approvalFor(h, expert, call.body.toolCallId as string);
    return (await h.t.http.get(`/v1/approvals/${listed.id}`).set(bearer(expert))).body as Record<string, unknown>;
  };

  it('names the asking key, the run’s specialist and the rule; a plain input has no warnings', async () => {
    const a = await ask(refundUse('40.00'));
    expect(a).toMatchObject({ requestedBy: agent.id, specialistId: 'refund-desk', ruleId: 'refunds-need-an-expert', reason: 'refunds are checked', inputWarnings: [], inputShownExactly: true });
    // The catalog's default (nango_proxy.post is high risk): no rule.
    const b = await ask(toolUse('nango_proxy', { action: 'post', path: '/v1/payouts', body: { payee: 'acme-payouts', amount: '1.00' } }));
    expect(b).toMatchObject({ ruleId: null, inputWarnings: [] });
  });

  it('warns where a screen may draw the input otherwise: direction overrides, zero-width characters, twin members, mixed scripts', async () => {
    const a = await ask(
      toolUse('nango_proxy', {
        action: 'post',
        path: '/v1/payouts',
        body: { payee: '\u0430cme-payouts', account: 'DE89\u200B3704', amount: '\u202E00.009', note: { amount: '1.00', 'amount\u200B': '900.00' } },
      }),
    );
    // The bytes shown are the bytes that run: the flag stays true; the warnings say what the flag cannot.
    expect(a.inputShownExactly).toBe(true);
    const warnings = a.inputWarnings as string[];
    // In the order the stored input holds its members (jsonb's).
    expect([...warnings].sort()).toEqual([
      'body.account: the value holds invisible or direction-changing characters (U+200B): a screen may show it otherwise than it runs',
      'body.amount: the value holds invisible or direction-changing characters (U+202E): a screen may show it otherwise than it runs',
      'body.note["amount\\u200B"]: drawn like the member "amount" beside it (two members, one name on screen)',
      'body.note["amount\\u200B"]: the member name holds invisible or direction-changing characters (U+200B): a screen may show it otherwise than it runs',
      'body.payee: the value mixes Latin letters with Cyrillic or Greek ones in one word (letters that look alike)',
    ]);
    const listed = (await h.t.http.get('/v1/approvals').set(bearer(expert)).query({ status: 'pending' })).body.items as { id: string; inputWarnings: string[] }[];
    expect(listed.find((x) => x.id === a.id)?.inputWarnings).toEqual(warnings);
  });

  it('says who decided: an expert, or the run’s own agent ending it (not an expert’s rejection)', async () => {
    const run = (await h.t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: 'refund-desk' })).body.id as string;
    const ended = await ask(refundUse('41.00'), run);
    const decided = await ask(refundUse('42.00'));
    await h.t.http.post(`/v1/runs/${run}/cancel`).set(bearer(agent.key)).send({ reason: 'Rejected by refund desk: duplicate request' });
    const res = await h.t.http.post(`/v1/approvals/${decided.id as string}/decision`).set(bearer(expert)).send({ decision: 'reject', actionDigest: decided.actionDigest });
    expect(res.body).toMatchObject({ status: 'rejected', decidedRole: 'expert' });
    const afterEnd = (await h.t.http.get(`/v1/approvals/${ended.id as string}`).set(bearer(expert))).body;
    expect(afterEnd).toMatchObject({ status: 'rejected', decidedRole: 'agent', decidedBy: agent.id, toolCallErrorCode: 'RUN_NOT_ACTIVE' });
  });
});
