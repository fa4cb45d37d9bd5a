import { describe, expect, it } from 'vitest';
import { ToolCatalogService } from '../catalog/tool-catalog.service.js';
import { AmazonHandler } from '../vendors/amazon/amazon.handler.js';
import { JumioHandler } from '../vendors/jumio/jumio.handler.js';
import { NangoHandler } from '../vendors/nango/nango.handler.js';
import { ShopifyHandler } from '../vendors/shopify/shopify.handler.js';
import type { VendorEndpoints } from '../vendors/vendor-handler.js';
import type { VendorRegistry } from '../vendors/vendor-registry.js';
import { evaluatePolicy } from './policy.engine.js';
import { catalogRuleChecks } from './policy-rule-values.js';
import { validatePolicyRules } from './policy-rules.validator.js';
import type { PolicyCondition, PolicyRule } from './policy.types.js';

/**
 * A param spelt in a way the provider reads as the rule's value though the two are not the same JSON: a number as
 * "+12", " 12" or "1.2e1", a boolean as "True", "1" or "on", a Unicode look-alike, a path in another letter case.
 * Such a comparison cannot be decided (one value to a lenient provider, two to a strict one), so the rule blocks the
 * call (fail closed), as it already did for 12 and "0012". And two PUT checks: a where path below a Nango query value
 * (always a scalar) and a rule shadowed by an earlier unconditional one are refused, as rules that can never match.
 */

const endpoints = {
  shopifyApiVersion: '2026-07',
  amazonLwaUrl: 'http://127.0.0.1:9/lwa',
  nangoHost: 'http://127.0.0.1:9',
  timeoutMs: 1_000,
  connectTimeoutMs: 1_000,
  maxResponseBytes: 1_000_000,
  userAgent: 'test',
} as VendorEndpoints;
const handlers = [new ShopifyHandler(endpoints), new AmazonHandler(endpoints), new JumioHandler(endpoints), new NangoHandler(endpoints)];
const catalog = new ToolCatalogService({ all: () => handlers } as unknown as VendorRegistry);
const known = catalogRuleChecks(catalog);

type Outcome = 'match' | 'no-match' | 'unevaluable';

/** How a nango_proxy rule with one condition judges the params (as the pipeline evaluates a Nango call). */
function judge(action: 'get' | 'post', condition: PolicyCondition, params: Record<string, unknown>): Outcome {
  const rule: PolicyRule = { id: 'r', match: { toolName: `nango_proxy.${action}`, where: [condition] }, decision: 'allow' };
  const d = evaluatePolicy({
    rules: [rule],
    toolName: 'nango_proxy',
    action,
    catalogRisk: action === 'get' ? 'medium' : 'high',
    params,
    pathParams: ['path'],
    textParams: action === 'get' ? ['query'] : [],
  });
  if (d.ruleId !== 'r') return 'no-match';
  return d.decision === 'block' ? 'unevaluable' : 'match';
}
const query = (op: PolicyCondition['op'], value: unknown, sent: unknown) => judge('get', { path: 'query.v', op, value }, { path: '/x', query: { v: sent } });
const body = (op: PolicyCondition['op'], value: unknown, sent: unknown) => judge('post', { path: 'body.v', op, value }, { path: '/x', body: { v: sent } });

describe('policy equality: a number sent in a lenient spelling of the rule value is unevaluable (blocks)', () => {
  it.each(['+12', ' 12', '12 ', '1.2e1', '12.', '+0012.0', '0x0C', '１２', '1_2'])('query %j against eq 12', (sent) => {
    expect(query('eq', 12, sent)).toBe('unevaluable');
  });

  it('4.2e1 against eq 42, and the rule value as the lenient text against a sent number', () => {
    expect(query('eq', 42, '4.2e1')).toBe('unevaluable');
    expect(query('eq', '+42', 42)).toBe('unevaluable');
  });

  it('in and ne allow-lists too: "+12" is not "another value" to an allow-list of 12', () => {
    expect(query('in', [12, 13], '+12')).toBe('unevaluable');
    expect(query('ne', 12, '+12')).toBe('unevaluable');
    // an equal item anywhere in the list still counts first
    expect(query('in', [12, '+12'], '+12')).toBe('match');
  });

  it('in a Nango post body (JSON, not text) as well', () => {
    expect(body('eq', 12, '+12')).toBe('unevaluable');
    expect(body('eq', 12, '1.2e1')).toBe('unevaluable');
    expect(body('eq', { a: 12 }, { a: ' 12' })).toBe('unevaluable');
  });

  it('control: the own text is equal, another number or a non-number is unequal', () => {
    expect(query('eq', 12, '12')).toBe('match');
    expect(query('eq', 12, 12)).toBe('match');
    expect(query('eq', 12, '+13')).toBe('no-match');
    expect(query('eq', 12, '1.3e1')).toBe('no-match');
    expect(query('eq', 12, '12abc')).toBe('no-match');
    expect(query('eq', 12, '')).toBe('no-match');
    expect(body('eq', 12, 'twelve')).toBe('no-match');
  });
});

describe('policy equality: a boolean sent in a lenient spelling is unevaluable (blocks)', () => {
  it.each(['True', 'TRUE', '1', 'yes', 'on', ' true', 'Y'])('query %j against eq true', (sent) => {
    expect(query('eq', true, sent)).toBe('unevaluable');
  });

  it.each(['False', 'FALSE', '0', 'no', 'off'])('query %j against eq false', (sent) => {
    expect(query('eq', false, sent)).toBe('unevaluable');
  });

  it('a number 1 or 0 sent as a query value is the text "1" or "0"', () => {
    expect(query('eq', true, 1)).toBe('unevaluable');
    expect(query('eq', false, 0)).toBe('unevaluable');
    expect(query('eq', true, 0)).toBe('no-match');
  });

  it('ne and in allow-lists too', () => {
    expect(query('ne', true, 'True')).toBe('unevaluable');
    expect(query('in', [true], 'on')).toBe('unevaluable');
  });

  it('in a Nango post body (JSON, not sent as text) a boolean and a text or number stay two types', () => {
    expect(body('eq', true, 'true')).toBe('no-match');
    expect(body('eq', true, 'True')).toBe('no-match');
    expect(body('eq', false, 0)).toBe('no-match');
  });

  it('control: the exact text of a query value is equal, the opposite spelling unequal', () => {
    expect(query('eq', true, 'true')).toBe('match');
    expect(query('eq', true, true)).toBe('match');
    expect(query('eq', true, 'False')).toBe('no-match');
    expect(query('eq', true, 'no')).toBe('no-match');
    expect(query('eq', true, 'maybe')).toBe('no-match');
  });
});

describe('policy equality: Unicode look-alikes (NFKC) are unevaluable (block)', () => {
  it('NFD "Jose\\u0301" against eq NFC "Jos\\u00e9", and fullwidth letters', () => {
    expect(query('eq', 'Jos\u00e9', 'Jose\u0301')).toBe('unevaluable');
    expect(query('eq', 'Jose\u0301', 'Jos\u00e9')).toBe('unevaluable');
    expect(query('in', ['admin'], 'ａｄｍｉｎ')).toBe('unevaluable');
    expect(body('eq', 'Jos\u00e9', 'Jose\u0301')).toBe('unevaluable');
  });

  it('control: the same spelling is equal, another name unequal', () => {
    expect(query('eq', 'Jos\u00e9', 'Jos\u00e9')).toBe('match');
    expect(query('eq', 'Jos\u00e9', 'Jose')).toBe('no-match');
  });
});

describe('policy equality: a Nango path in another letter case is unevaluable (blocks)', () => {
  const path = (op: PolicyCondition['op'], value: unknown, sent: string) => judge('get', { path: 'path', op, value }, { path: sent });

  it('"/v1/Admin/Users" against eq, ne and in of "/v1/admin/users" (trailing "/" ignored as before)', () => {
    expect(path('eq', '/v1/admin/users', '/v1/Admin/Users')).toBe('unevaluable');
    expect(path('eq', '/v1/admin/users', '/V1/ADMIN/USERS/')).toBe('unevaluable');
    expect(path('ne', '/v1/admin/users', '/v1/Admin/Users')).toBe('unevaluable');
    expect(path('in', ['/v1/admin/users'], '/v1/Admin/Users')).toBe('unevaluable');
  });

  it('control: the same path is equal (with or without "/"), another unequal', () => {
    expect(path('eq', '/v1/admin/users', '/v1/admin/users/')).toBe('match');
    expect(path('eq', '/v1/admin/users', '/v1/admin/groups')).toBe('no-match');
  });
});

describe('PUT: a where path below a Nango query value is refused', () => {
  const errorsOf = (rules: unknown[]): string[] => {
    const out = validatePolicyRules(rules, known);
    return out.ok ? [] : out.errors;
  };
  const rule = (path: string, toolName = 'nango_proxy.get') => [{ id: 'r', match: { toolName, where: [{ path, op: 'eq', value: '1' }] }, decision: 'block' }];

  it.each(['query.page.size', 'query.ids.0'])('%s on nango_proxy.get and nango_proxy.*', (path) => {
    const errors = errorsOf(rule(path));
    expect(errors).toHaveLength(1);
    // "0" does not look like a field name, so that path is not echoed (isEchoableFieldName)
    expect(errors[0]).toMatch(/^rules\[0\] \("r"\): where\[0\]\.path .* is never present in a call of nango_proxy\.get \(GET \/v1\/tools lists their input schemas\)$/);
    expect(errorsOf(rule(path, 'nango_proxy.*'))).toHaveLength(1);
  });

  it('control: a query value itself is accepted', () => {
    expect(errorsOf(rule('query.page'))).toEqual([]);
  });
});

describe('PUT: a rule shadowed by an earlier rule without where is refused', () => {
  const errorsOf = (rules: unknown[], by = known): string[] => {
    const out = validatePolicyRules(rules, by);
    return out.ok ? [] : out.errors;
  };
  const bigRefunds = { id: 'big-refunds', match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'gt', value: 1000 }] }, decision: 'block' };

  it('after "allow shopify_refund.*", naming both rules', () => {
    expect(errorsOf([{ id: 'refunds-ok', match: { toolName: 'shopify_refund.*' }, decision: 'allow' }, bigRefunds])).toEqual([
      'rules[1] ("big-refunds"): can never match: rules[0] ("refunds-ok") comes first, has no where conditions and matches every call this rule could (the first matching rule wins); put this rule before it, or narrow rules[0]',
    ]);
  });

  it.each<[string, Record<string, unknown>]>([
    ['no match at all', { id: 'all', decision: 'observe' }],
    ['no toolName', { id: 'all', match: {}, decision: 'observe' }],
    ['an empty where', { id: 'all', match: { toolName: 'shopify_refund.create', where: [] }, decision: 'observe' }],
    ['the same action', { id: 'all', match: { toolName: 'shopify_refund.create' }, decision: 'observe' }],
    ['the risk level of every action it names', { id: 'all', match: { riskLevel: 'high' }, decision: 'observe' }],
  ])('earlier rule with %s', (_what, earlier) => {
    const errors = errorsOf([earlier, bigRefunds]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^rules\[1\] \("big-refunds"\): can never match: rules\[0\] \("all"\) comes first/);
  });

  it('a later rule with its own riskLevel, and a tool-wide one after another tool-wide one', () => {
    expect(errorsOf([{ id: 'a', match: { toolName: 'nango_proxy.*' }, decision: 'observe' }, { id: 'b', match: { toolName: 'nango_proxy.*', riskLevel: 'high' }, decision: 'block' }])).toHaveLength(1);
    expect(errorsOf([{ id: 'a', match: { riskLevel: 'high' }, decision: 'observe' }, { id: 'b', match: { riskLevel: 'high' }, decision: 'block' }])).toHaveLength(1);
  });

  it('control: not shadowed when the earlier rule has a where, names less, or another risk level', () => {
    expect(errorsOf([bigRefunds, { id: 'refunds-ok', match: { toolName: 'shopify_refund.*' }, decision: 'allow' }])).toEqual([]);
    expect(errorsOf([{ ...bigRefunds, id: 'first' }, bigRefunds])).toEqual([]);
    expect(errorsOf([{ id: 'a', match: { toolName: 'nango_proxy.get' }, decision: 'observe' }, { id: 'b', match: { toolName: 'nango_proxy.*' }, decision: 'block' }])).toEqual([]);
    expect(errorsOf([{ id: 'a', match: { riskLevel: 'medium' }, decision: 'observe' }, { id: 'b', match: { toolName: 'nango_proxy.*' }, decision: 'block' }])).toEqual([]);
    expect(errorsOf([{ id: 'a', match: { toolName: 'nango_proxy.*', riskLevel: 'medium' }, decision: 'observe' }, { id: 'b', match: { toolName: 'nango_proxy.post' }, decision: 'block' }])).toEqual([]);
  });

  it('stored rules (validated without the catalog) are read as they are', () => {
    expect(validatePolicyRules([{ id: 'refunds-ok', match: { toolName: 'shopify_refund.*' }, decision: 'allow' }, bigRefunds]).ok).toBe(true);
  });
});
