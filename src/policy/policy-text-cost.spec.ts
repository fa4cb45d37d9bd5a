import { describe, expect, it } from 'vitest';
import { evaluatePolicy } from './policy.engine.js';
import { POLICY_LIMITS } from './policy.types.js';
import { medianMs } from '../common/timing.spec-support.js';


/**
 * A call's text param meets every value of every rule on its path. Each comparison worked out the param's Unicode form
 * (NFKC) afresh, or for an ASCII param checked it for ASCII afresh: a 500 KiB `body.status` (a nango_proxy.post body
 * is free-form, its cap 512 KiB) against one rule's 500-value `in` list held the event loop 12 s; an ASCII one against
 * 20 such rules 4 s. Now the param's form is worked out once per evaluation (TextFacts). Bounded against the cost of
 * that one look at the same text, measured at the same moment, so the bound holds on a loaded machine too.
 */
describe('policy evaluation: a long text param is looked at once, however many rule values it meets', () => {
  const inRule = (id: string, path: string, values: string[]) => ({ id, decision: 'allow' as const, match: { toolName: 'nango_proxy.post', where: [{ path, op: 'in' as const, value: values }] } });
  const evaluate = (rules: unknown[], body: Record<string, unknown>) =>
    evaluatePolicy({ rules: rules as never, toolName: 'nango_proxy', action: 'post', catalogRisk: 'high', params: { path: '/v1/orders', body }, pathParams: ['path'] });

  it('a non-ASCII 500 KiB text against a 500-value in list: about one NFKC pass, not one per value', () => {
    const text = '\uFDFA'.repeat(170_000); // 3 UTF-8 bytes each: just under the 512 KiB body
    const rules = [inRule('known-status', 'body.status', Array.from({ length: POLICY_LIMITS.maxInValues }, (_, i) => `status_${i}`))];
    expect(evaluate(rules, { status: text }).decision).toBe('require_expert_approval'); // no value matched: the default
    const onePass = medianMs(() => text.normalize('NFKC'));
    const evaluation = medianMs(() => evaluate(rules, { status: text }));
    expect(evaluation).toBeLessThan(20 * onePass + 50);
  });

  it('an ASCII 500 KB text against 20 rules of 500 values (a 61 KB policy): about one ASCII check, not 10,000', () => {
    const text = 'x'.repeat(500_000);
    const rules = Array.from({ length: 20 }, (_, r) => inRule(`r${r}`, 'body.s', Array.from({ length: 500 }, (_, i) => (r * 500 + i).toString(36))));
    expect(evaluate(rules, { s: text }).decision).toBe('require_expert_approval');
    const onePass = medianMs(() => /[^\p{ASCII}]/u.test(text));
    const evaluation = medianMs(() => evaluate(rules, { s: text }));
    expect(evaluation).toBeLessThan(100 * onePass + 50);
  });

  it('still finds a text equal only after NFKC (a fullwidth spelling) unevaluable, in a long list too', () => {
    const values = [...Array.from({ length: 499 }, (_, i) => `status_${i}`), 'refunded'];
    const d = evaluate([inRule('known-status', 'body.status', values)], { status: 'ｒｅｆｕｎｄｅｄ' });
    expect(d).toMatchObject({ decision: 'block', ruleId: 'known-status' });
    expect(d.reason).toMatch(/two Unicode forms/);
    expect(evaluate([inRule('known-status', 'body.status', values)], { status: 'refunded' }).decision).toBe('allow');
  });
  it('a long param stays worked out against many long rule values (the memo kept the newest, and the param was evicted)', () => {
    const text = '\uFDFA'.repeat(170_000);
    const values = Array.from({ length: 240 }, (_, i) => `${i}_`.padEnd(256, 'v')); // about 64 KiB of policy
    const rules = [inRule('long-values', 'body.status', values)];
    expect(evaluate(rules, { status: text }).decision).toBe('require_expert_approval');
    const onePass = medianMs(() => text.normalize('NFKC'));
    // 27 passes before (524 ms against 19.5 ms for one).
    expect(medianMs(() => evaluate(rules, { status: text }))).toBeLessThan(5 * onePass + 50);
  });
});
