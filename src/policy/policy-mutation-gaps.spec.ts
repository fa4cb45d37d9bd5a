/**
 * Cases a mutation-testing pass found untested: each fails on a surviving
 * mutant of src/policy/policy-equality.ts. Pure functions, no database.
 */
import { describe, expect, it } from 'vitest';
import { evaluatePolicy } from './policy.engine.js';
import type { PolicyCondition } from './policy.types.js';

const decide = (condition: PolicyCondition, params: unknown) =>
  evaluatePolicy({
    rules: [{ id: 'r1', match: { toolName: 'shopify_refund.create', where: [condition] }, decision: 'allow', reason: 'matched' }],
    toolName: 'shopify_refund',
    action: 'create',
    catalogRisk: 'high',
    params,
  });

describe('eq / ne on arrays (policy-equality.ts jsonSameness)', () => {
  // policy-equality.ts:119 drop `|| a.length !== b.length`: a shorter param array then equals any rule array it is a prefix of
  it('a param array shorter than the rule value is not equal to it', () => {
    expect(decide({ path: 'tags', op: 'eq', value: ['a', 'b'] }, { tags: ['a'] })).toMatchObject({ decision: 'require_expert_approval', ruleId: null });
    expect(decide({ path: 'tags', op: 'ne', value: ['a', 'b'] }, { tags: ['a'] })).toMatchObject({ decision: 'allow', ruleId: 'r1' });
  });

  // policy-equality.ts:121 `ambiguous ? 'ambiguous' : 'equal'` -> 'equal': one number spelt two ways inside an array
  // then counts as equal, so an `ne` allow-list of ["0012"] lets [12] through, where an object or a scalar blocks.
  it('one number spelt two ways inside an array is unevaluable (blocks), as it is in an object', () => {
    const inArray = decide({ path: 'ids', op: 'ne', value: ['0012'] }, { ids: [12] });
    expect(inArray).toMatchObject({ decision: 'block', ruleId: 'r1' });
    expect(inArray.reason).toMatch(/could not be evaluated/);
    const inObject = decide({ path: 'o', op: 'ne', value: { id: '0012' } }, { o: { id: 12 } });
    expect(inObject).toMatchObject({ decision: 'block', ruleId: 'r1' });
  });
});
