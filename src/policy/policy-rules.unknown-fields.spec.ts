import { describe, expect, it } from 'vitest';
import { validatePolicyRules } from './policy-rules.validator.js';

const errorsOf = (input: unknown): string[] => {
  const result = validatePolicyRules(input);
  if (result.ok) throw new Error('expected validation to fail');
  return result.errors;
};

/** An unknown field is named when it looks like a field name (a typo to fix), never when it may be a pasted value. */
describe('validatePolicyRules: which unknown fields a 400 names', () => {
  it('names an identifier-like unknown field at every level, as before', () => {
    expect(errorsOf([{ id: 'a', decision: 'allow', priorty: 1 }])).toEqual(['rules[0] ("a"): unknown field "priorty"']);
    expect(errorsOf([{ id: 'a', decision: 'allow', match: { tool_name: 'x' } }])).toEqual(['rules[0] ("a"): unknown field match."tool_name"']);
  });

  it('does not echo a key that is no identifier (a token, an address, a sentence): it says where, and what is allowed', () => {
    const pasted = ['sk-live-0123456789abcdef0123456789', 'Bearer tgw_0123456789', 'ops@example.com', '0123456789abcdef', 'x'.repeat(42)];
    for (const key of pasted) {
      const errors = [
        ...errorsOf([{ id: 'a', decision: 'allow', [key]: 1 }]),
        ...errorsOf([{ id: 'a', decision: 'allow', match: { [key]: 1 } }]),
        ...errorsOf([{ id: 'a', decision: 'allow', match: { where: [{ path: 'p', op: 'exists', [key]: 1 }] } }]),
      ];
      expect(errors.join('\n'), key).not.toContain(key.slice(0, 12));
      expect(errors).toEqual([
        'rules[0] ("a"): has an unknown field, not named as it does not look like a field name; allowed: id, match, decision, riskLevel, reason',
        'rules[0] ("a"): match has an unknown field, not named as it does not look like a field name; allowed: toolName, riskLevel, where',
        'rules[0] ("a"): where[0] has an unknown field, not named as it does not look like a field name; allowed: path, op, value',
      ]);
    }
  });

  it('names the identifier-like ones beside and says once that there are others', () => {
    expect(errorsOf([{ id: 'a', decision: 'allow', note: 'x', 'not a name': 1, 'nor-this': 2 }])).toEqual([
      'rules[0] ("a"): unknown field "note"',
      'rules[0] ("a"): has an unknown field, not named as it does not look like a field name; allowed: id, match, decision, riskLevel, reason',
    ]);
  });
});
