import { describe, expect, it } from 'vitest';
import { evaluatePolicy } from '../policy/policy.engine.js';
import type { PolicyRule } from '../policy/policy.types.js';
import type { ToolSpec, VendorHandler } from '../vendors/vendor-handler.js';
import { CANONICAL_MEMO_CHARS_MAX, canonicalMemoSize, policyParamFacts, type CatalogEntry } from './tool-catalog.service.js';

/** A handler that spells `path` with a leading "/", and counts what the policy asks of it. */
function countingEntry(name: string) {
  const asked = { param: [] as unknown[], wholeCall: 0 };
  const tool: ToolSpec = {
    name,
    vendor: 'nango',
    description: 'x',
    actions: [{ name: 'get', description: 'x', inputSchema: { type: 'object' }, riskLevel: 'low', sideEffect: 'read', idempotent: true, costCents: 0 }],
  };
  const handler: VendorHandler = {
    vendor: 'nango',
    tools: [tool],
    canonicalParams: (_t, _a, params) => {
      asked.wholeCall++;
      return params;
    },
    canonicalParam: (_t, _a, param, value) => {
      asked.param.push(value);
      return param === 'path' && typeof value === 'string' && !value.startsWith('/') ? `/${value}` : value;
    },
    execute: () => Promise.reject(new Error('not called')),
  };
  const entry: CatalogEntry = { tool, action: tool.actions[0], vendor: 'nango', handler, key: `${name}.get` };
  return { entry, asked };
}

describe('policyParamFacts: rule values in the spelling of the params', () => {
  // The values canonicalised are remembered process-wide by tool and action: each test has a tool of its own.
  const decide = (entry: CatalogEntry, path: string) => {
    const rules: PolicyRule[] = [
      { id: 'admin', match: { toolName: entry.key, where: [{ path: 'path', op: 'in', value: ['v1/admin', 'v1/root', 'v1/keys'] }] }, decision: 'block' },
    ];
    return evaluatePolicy({ rules, toolName: entry.tool.name, action: 'get', catalogRisk: 'low', params: { path }, ...policyParamFacts(entry) }).decision;
  };

  it('canonicalises each value a rule compares through the handler\'s one-param canonicaliser, never the whole call', () => {
    const { entry, asked } = countingEntry('facts_tool');
    expect(decide(entry, '/v1/root')).toBe('block');
    expect(decide(entry, '/v1/other')).not.toBe('block');
    expect(asked.wholeCall).toBe(0);
  });

  it('asks for each distinct rule value once, however many calls the rules decide (a policy may hold thousands)', () => {
    const { entry, asked } = countingEntry('facts_tool_memo');
    for (let i = 0; i < 20; i++) decide(entry, `/v1/other${i}`);
    expect(asked.param.sort()).toEqual(['v1/admin', 'v1/keys', 'v1/root']);
  });

  it('the memo is bounded in characters as well as in count: long values, policy after policy, never hold more than its bound', () => {
    const { entry } = countingEntry('facts_tool_long');
    const facts = policyParamFacts(entry);
    // 4,000 distinct paths of 2,000 characters and their canonical forms: some 16 million characters.
    for (let i = 0; i < 4_000; i++) facts.canonicalValue!('path', `v1/${String(i).padStart(6, '0')}/${'p'.repeat(1_990)}`);
    const { values, chars } = canonicalMemoSize();
    expect(chars).toBeLessThanOrEqual(CANONICAL_MEMO_CHARS_MAX); // before: 16 million, kept until 50,000 values
    expect(values).toBeGreaterThan(0);
  });
});
