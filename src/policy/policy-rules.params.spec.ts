import { describe, expect, it } from 'vitest';
import { JUMIO_TOOLS } from '../vendors/jumio/jumio.tools.js';
import { NANGO_TOOLS } from '../vendors/nango/nango.tools.js';
import { SHOPIFY_TOOLS } from '../vendors/shopify/shopify.tools.js';
import { paramNamesIndex, type ToolParams } from './policy-param-names.js';
import { validatePolicyRules, type KnownTools } from './policy-rules.validator.js';

function knownOf(tools: readonly ToolParams[]): KnownTools {
  const keys = new Set(tools.flatMap((t) => t.actions.map((a) => `${t.name}.${a.name}`)));
  return { has: (k) => keys.has(k), isTool: (n) => tools.some((t) => t.name === n), paramsOf: paramNamesIndex(tools) };
}

const known = knownOf([...SHOPIFY_TOOLS, ...NANGO_TOOLS, ...JUMIO_TOOLS]);
const where = (path: string, toolName?: string) => [
  { id: 'r', match: { ...(toolName === undefined ? {} : { toolName }), where: [{ path, op: 'eq', value: '1' }] }, decision: 'block' },
];
const errorsOf = (rules: unknown, by: KnownTools = known): string[] => {
  const out = validatePolicyRules(rules, by);
  return out.ok ? [] : out.errors;
};

describe('validatePolicyRules: a where path must name a param of the matched actions', () => {
  it('refuses a misspelt param of the one action named, listing its params', () => {
    expect(errorsOf(where('orderID', 'shopify_order.add_note'))).toEqual([
      'rules[0] ("r"): where[0].path "orderID" is not a param of shopify_order.add_note (its params: note, orderId)',
    ]);
  });

  it('checks the first segment only: nested members are the vendor’s business', () => {
    expect(errorsOf(where('query.dryRun', 'nango_proxy.get'))).toEqual([]);
    expect(errorsOf(where('query.0.anything', 'nango_proxy.*'))).toEqual([]);
    expect(errorsOf(where('qurey.dryRun', 'nango_proxy.get'))).toEqual([
      'rules[0] ("r"): where[0].path "qurey.dryRun": "qurey" is not a param of nango_proxy.get (its params: path, query)',
    ]);
  });

  it('a param of another action of the tool is not one of the action named', () => {
    expect(errorsOf(where('body', 'nango_proxy.post'))).toEqual([]);
    expect(errorsOf(where('body', 'nango_proxy.get'))[0]).toContain('"body" is not a param of nango_proxy.get');
  });

  it('for tool.*, a param of any of its actions; for no toolName, of any catalog action', () => {
    expect(errorsOf(where('body', 'nango_proxy.*'))).toEqual([]);
    expect(errorsOf(where('amount', 'shopify_refund.*'))).toEqual([]);
    expect(errorsOf(where('amount', 'nango_proxy.*'))).toEqual([
      'rules[0] ("r"): where[0].path "amount" is not a param of any nango_proxy action (GET /v1/tools lists them)',
    ]);
    expect(errorsOf(where('workflowExecutionId'))).toEqual([]);
    expect(errorsOf(where('orderID'))).toEqual([
      'rules[0] ("r"): where[0].path "orderID" is not a param of any catalog action (GET /v1/tools lists them)',
    ]);
  });

  it('whatever the op: exists false and ne on a missing param would hold on every call, just as silently', () => {
    for (const condition of [{ path: 'amout', op: 'exists', value: false }, { path: 'amout', op: 'ne', value: '1' }, { path: 'amout', op: 'gt', value: 1 }]) {
      const errors = errorsOf([{ id: 'r', match: { toolName: 'shopify_refund.create', where: [condition] }, decision: 'allow' }]);
      expect(errors, condition.op).toHaveLength(1);
      expect(errors[0]).toContain('"amout" is not a param of shopify_refund.create');
    }
  });

  it('names every bad condition of every rule, and keeps the good ones', () => {
    const rules = [
      { id: 'ok', match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'gt', value: 100 }] }, decision: 'block' },
      { id: 'two', match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'gt', value: 1 }, { path: 'Currency', op: 'eq', value: 'USD' }, { path: 'notes', op: 'exists' }] }, decision: 'block' },
    ];
    const errors = errorsOf(rules);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/^rules\[1\] \("two"\): where\[1\]\.path "Currency" is not a param/);
    expect(errors[1]).toMatch(/^rules\[1\] \("two"\): where\[2\]\.path "notes" is not a param/);
  });

  it('an unknown toolName is refused for its name alone, not once more for each path', () => {
    expect(errorsOf(where('orderID', 'shopify_orders.add_note'))).toEqual([
      'rules[0] ("r"): match.toolName "shopify_orders.add_note" names no tool action of the catalog (GET /v1/tools lists them)',
    ]);
  });

  it('takes any name where a schema takes params it does not list, and none where it takes no params', () => {
    const open = knownOf([{ name: 'open', actions: [{ name: 'go', inputSchema: { type: 'object', properties: { a: {} } } }] }]);
    expect(errorsOf(where('anything', 'open.go'), open)).toEqual([]);
    const closed = knownOf([{ name: 'bare', actions: [{ name: 'go', inputSchema: { type: 'object', additionalProperties: false } }] }]);
    expect(errorsOf(where('a', 'bare.go'), closed)).toEqual(['rules[0] ("r"): where[0].path "a" is not a param of bare.go (it takes none)']);
  });

  it('without the catalog (stored rules read back) the path is only checked for its shape', () => {
    expect(validatePolicyRules(where('orderID', 'shopify_order.add_note')).ok).toBe(true);
  });
});
