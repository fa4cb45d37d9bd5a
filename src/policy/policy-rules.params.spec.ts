import { describe, expect, it } from 'vitest';
import { ToolCatalogService } from '../catalog/tool-catalog.service.js';
import { AmazonHandler } from '../vendors/amazon/amazon.handler.js';
import { JumioHandler } from '../vendors/jumio/jumio.handler.js';
import { NangoHandler } from '../vendors/nango/nango.handler.js';
import { ShopifyHandler } from '../vendors/shopify/shopify.handler.js';
import type { VendorEndpoints } from '../vendors/vendor-handler.js';
import type { VendorRegistry } from '../vendors/vendor-registry.js';
import { JUMIO_TOOLS } from '../vendors/jumio/jumio.tools.js';
import { NANGO_TOOLS } from '../vendors/nango/nango.tools.js';
import { SHOPIFY_TOOLS } from '../vendors/shopify/shopify.tools.js';
import { patternMayMatchDecimal } from './policy-decimal-pattern.js';
import { paramNamesIndex, type ToolParams } from './policy-param-names.js';
import { catalogRuleChecks } from './policy-rule-values.js';
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

/** The gateway's catalog, with the vendors' own handlers (their canonical spellings and checks). */
function realCatalog(): KnownTools {
  const endpoints: VendorEndpoints = {
    shopifyApiVersion: '2026-07',
    amazonLwaUrl: 'http://127.0.0.1:9/lwa',
    nangoHost: 'http://127.0.0.1:9',
    timeoutMs: 1_000,
    connectTimeoutMs: 1_000,
    maxResponseBytes: 1_000_000,
    userAgent: 'test',
  };
  const handlers = [new ShopifyHandler(endpoints), new AmazonHandler(endpoints), new JumioHandler(endpoints), new NangoHandler(endpoints)];
  return catalogRuleChecks(new ToolCatalogService({ all: () => handlers } as unknown as VendorRegistry));
}

describe('validatePolicyRules with the catalog: an eq, ne or in value must be one some call the rule applies to can carry', () => {
  const catalog = realCatalog();
  const TOKEN = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc';
  const cond = (path: string, op: string, value: unknown, match: Record<string, unknown> = {}) => [
    { id: 'r', match: { ...match, where: [{ path, op, value }] }, decision: 'block' },
  ];
  const on = (toolName: string, path: string, value: unknown, op = 'eq') => cond(path, op, value, { toolName });

  it('refuses, naming the condition and why, a value no valid call carries: a block on it would never apply', () => {
    expect(errorsOf(on('shopify_refund.create', 'currency', 'usd'), catalog)).toEqual([
      'rules[0] ("r"): where[0].value can never match currency: must match pattern "^[A-Z]{3}$"',
    ]);
    // Shopify reads "012345" as order 12345, but no call may spell it so (one spelling per id), and ids compare as text.
    expect(errorsOf(on('shopify_refund.create', 'orderId', '012345'), catalog)).toEqual([
      'rules[0] ("r"): where[0].value can never match orderId: must match pattern "^[1-9][0-9]{0,18}$"',
    ]);
    // The vendor's own checks count too: a call's path must be percent-encoded, and a refund is of more than 0.
    expect(errorsOf(on('nango_proxy.get', 'path', '/v1/search/café'), catalog)).toEqual([
      'rules[0] ("r"): where[0].value can never match path: contains characters that must be percent-encoded',
    ]);
    expect(errorsOf(on('nango_proxy.*', 'path', '/v1/files/my report'), catalog)).toEqual([
      'rules[0] ("r"): where[0].value can never match path: contains characters that must be percent-encoded',
    ]);
    expect(errorsOf(on('nango_proxy.get', 'path', '/v1/users?admin=1'), catalog)[0]).toContain('where[0].value can never match path: put query parameters in `query`');
    expect(errorsOf(on('shopify_refund.create', 'amount', '0.00'), catalog)).toEqual(['rules[0] ("r"): where[0].value can never match amount: must be greater than 0']);
    for (const [path, value] of [['amount', '-5'], ['amount', '1.2345'], ['amount', 'ten'], ['orderId', 12345.5], ['currency', null], ['note', true], ['note', 'x'.repeat(501)]] as const) {
      expect(errorsOf(on('shopify_refund.create', path, value), catalog), `${path} ${String(value)}`).toHaveLength(1);
    }
    // A number equals the decimal text of its value: note 7 is the call's note "7".
    expect(errorsOf(on('shopify_refund.create', 'note', 7), catalog)).toEqual([]);
    expect(errorsOf(on('kyc.get_status', 'workflowExecutionId', 'not-a-uuid'), catalog)).toHaveLength(1);
    expect(errorsOf(on('nango_proxy.get', 'query.dryRun', null), catalog)).toEqual([
      'rules[0] ("r"): where[0].value can never match query.dryRun: must be string or must be number or must be boolean',
    ]);
  });

  it('ne and each item of in are checked too, the item named by its index', () => {
    expect(errorsOf(on('shopify_refund.create', 'currency', 'usd', 'ne'), catalog)).toHaveLength(1);
    expect(errorsOf(on('shopify_refund.create', 'currency', ['USD', 'eur', 'GBP', 'gbp'], 'in'), catalog)).toEqual([
      'rules[0] ("r"): where[0].value[1] can never match currency: must match pattern "^[A-Z]{3}$"',
      'rules[0] ("r"): where[0].value[3] can never match currency: must match pattern "^[A-Z]{3}$"',
    ]);
    // Other ops compare by order or presence: not values a call carries.
    expect(errorsOf(on('shopify_refund.create', 'amount', '-5', 'gt'), catalog)).toEqual([]);
  });

  it('takes a value that equals a valid param in the spelling the engine compares: amounts by value, numbers as decimal text, paths and ids canonicalised', () => {
    const fine: [string, string, unknown][] = [
      // An amount matches by value: "10.50" and 10.5 are the call's "10.5"; "10.5000" has more decimals than a call may, but the same value.
      ['shopify_refund.create', 'amount', '10.50'],
      ['shopify_refund.create', 'amount', 10.5],
      ['shopify_refund.create', 'amount', '10.5000'],
      ['shopify_refund.create', 'amount', '0100'],
      ['shopify_refund.create', 'amount', 100],
      // A number equals the decimal text of its value: 12345 is the call's "12345".
      ['shopify_refund.create', 'orderId', 12345],
      // Canonicalised as the call is: a leading "/" added, hex upper-cased, a UUID lower-cased; a trailing "/" ignored.
      ['nango_proxy.get', 'path', 'v1/admin/users'],
      ['nango_proxy.get', 'path', '/v1/search/caf%c3%a9'],
      ['nango_proxy.post', 'path', '/api/v1/lead/'],
      ['kyc.get_status', 'workflowExecutionId', 'A1B2C3D4-0000-4000-8000-000000000001'],
      // A query value is sent as text: false and "false" are one.
      ['nango_proxy.get', 'query.dryRun', 'false'],
      ['nango_proxy.get', 'query.dryRun', false],
      ['nango_proxy.get', 'query', { dryRun: 'false' }],
    ];
    for (const [toolName, path, value] of fine) {
      expect(errorsOf(on(toolName, path, value), catalog), `${toolName} ${path} ${JSON.stringify(value)}`).toEqual([]);
      expect(errorsOf(on(toolName, path, [value], 'in'), catalog), `in ${JSON.stringify(value)}`).toEqual([]);
    }
    // What the schema cannot say simply is let through (a body of any shape).
    expect(errorsOf(on('nango_proxy.post', 'body.items.0.qty', 1), catalog)).toEqual([]);
    // A currency a call can carry, once a guard says the rule is for the refunds that name one.
    const usd = [{ id: 'r', match: { toolName: 'shopify_refund.create', where: [{ path: 'currency', op: 'exists' }, { path: 'currency', op: 'eq', value: 'USD' }] }, decision: 'block' }];
    expect(errorsOf(usd, catalog)).toEqual([]);
  });

  it('judges the value against every action the rule applies to (toolName and riskLevel): one that takes it is enough', () => {
    const amazonId = '112-0000001-1234567';
    // No toolName: an Amazon order id is an orderId of amazon_query.*, never of a Shopify action.
    expect(errorsOf(cond('orderId', 'eq', amazonId), catalog)).toEqual([]);
    expect(errorsOf(cond('orderId', 'eq', amazonId, { riskLevel: 'low' }), catalog)).toEqual([]);
    // High risk: only the Shopify refund takes an orderId, and never that one.
    expect(errorsOf(cond('orderId', 'eq', amazonId, { riskLevel: 'high' }), catalog)).toHaveLength(1);
    expect(errorsOf(on('order_lookup.*', 'orderId', amazonId), catalog)).toHaveLength(1);
    expect(errorsOf(cond('orderId', 'eq', '012345'), catalog)).toHaveLength(1);
  });

  it('refuses a match.riskLevel none of the named actions has: it is compared with the catalog risk, and would never match', () => {
    const rule = (match: Record<string, unknown>) => [{ id: 'r', match, decision: 'block' }];
    expect(errorsOf(rule({ toolName: 'shopify_refund.create', riskLevel: 'medium' }), catalog)).toEqual([
      'rules[0] ("r"): match.riskLevel "medium" can never match: shopify_refund.create is high in the catalog',
    ]);
    expect(errorsOf(rule({ toolName: 'shopify_refund.*', riskLevel: 'low' }), catalog)).toEqual([
      'rules[0] ("r"): match.riskLevel "low" can never match: shopify_refund actions are high in the catalog',
    ]);
    expect(errorsOf(rule({ toolName: 'shopify_refund.create', riskLevel: 'high' }), catalog)).toEqual([]);
    expect(errorsOf(rule({ riskLevel: 'medium' }), catalog)).toEqual([]);
    // Without the catalog's risks (a stand-in, stored rules read back): the shape only.
    expect(errorsOf(rule({ toolName: 'shopify_refund.create', riskLevel: 'medium' }))).toEqual([]);
  });

  it('refuses an in with no value when saved (it holds for no call); a stored rule so written is still read, as saved rules are', () => {
    const rules = on('shopify_refund.create', 'orderId', [], 'in');
    expect(errorsOf(rules, catalog)).toEqual(['rules[0] ("r"): where[0].value must hold at least one value for in (an empty list holds for no call)']);
    expect(validatePolicyRules(rules).ok).toBe(true);
  });

  it('refuses a where path no call the rule applies to holds: a param only actions of another risk take, a field below a text param', () => {
    // No low-risk action takes an amount (the refund, which does, is high).
    expect(errorsOf(cond('amount', 'eq', '500.00', { riskLevel: 'low' }), catalog)).toEqual([
      'rules[0] ("r"): where[0].path "amount" is never present in a call of any catalog action of risk low (GET /v1/tools lists their input schemas)',
    ]);
    // amount is text: it has no field "value".
    expect(errorsOf(on('shopify_refund.create', 'amount.value', '500.00'), catalog)).toEqual([
      'rules[0] ("r"): where[0].path "amount.value" is never present in a call of shopify_refund.create (GET /v1/tools lists their input schemas)',
    ]);
    expect(errorsOf(on('shopify_refund.create', 'amount', 100, 'gt'), catalog)).toEqual([]);
    // exists:false and ne hold for a call without the param: vacuous, never failing open, so not refused.
    expect(errorsOf(cond('amount', 'exists', false, { riskLevel: 'medium' }), catalog)).toEqual([]);
    expect(errorsOf(cond('amount', 'ne', '1.00', { riskLevel: 'medium' }), catalog)).toEqual([]);
    expect(errorsOf(cond('amount', 'exists', true, { riskLevel: 'medium' }), catalog)).toHaveLength(1);
    // An open body is never judged absent.
    expect(errorsOf(on('nango_proxy.post', 'body.items.0.qty', 1), catalog)).toEqual([]);
  });

  it('refuses a comparison on a param some of the rule’s actions never take: their calls would all be blocked, unless an exists guard comes first', () => {
    expect(errorsOf(cond('amount', 'lte', 50, { riskLevel: 'high' }), catalog)).toEqual([
      'rules[0] ("r"): where[0].path "amount" is compared (lte) but is never present in a call of nango_proxy.post: the rule could not be evaluated for those calls and would block them; narrow match.toolName, or put {"path": "amount", "op": "exists"} before it',
    ]);
    const [noTool] = errorsOf(cond('amount', 'gt', 1000), catalog);
    expect(noTool).toMatch(/is compared \(gt\) but is never present in a call of [a-z_.]+(, [a-z_.]+){4} and \d+ more: /);
    expect(noTool).not.toContain('shopify_refund.create');
    // Guarded by exists on the same path first, a call without it is simply not matched.
    for (const value of [undefined, true]) {
      const guarded = [{ id: 'r', match: { riskLevel: 'high', where: [{ path: 'amount', op: 'exists', ...(value === undefined ? {} : { value }) }, { path: 'amount', op: 'lte', value: 50 }] }, decision: 'allow' }];
      expect(errorsOf(guarded, catalog)).toEqual([]);
    }
    // A guard after the comparison, on another path, or exists:false does not guard it.
    for (const guard of [{ path: 'amount', op: 'exists', value: false }, { path: 'orderId', op: 'exists' }]) {
      const rules = [{ id: 'r', match: { riskLevel: 'high', where: [guard, { path: 'amount', op: 'lte', value: 50 }] }, decision: 'allow' }];
      expect(errorsOf(rules, catalog), JSON.stringify(guard)).toHaveLength(1);
    }
    const after = [{ id: 'r', match: { riskLevel: 'high', where: [{ path: 'amount', op: 'lte', value: 50 }, { path: 'amount', op: 'exists' }] }, decision: 'allow' }];
    expect(errorsOf(after, catalog)).toHaveLength(1);
    // eq, ne and in on a missing param are false, true and false: no block, not refused.
    expect(errorsOf(cond('amount', 'eq', '1.00', { riskLevel: 'high' }), catalog)).toEqual([]);
  });

  it('never repeats the value (it may be a pasted secret)', () => {
    const errors = errorsOf(on('shopify_refund.create', 'orderId', TOKEN), catalog);
    expect(errors).toHaveLength(1);
    expect(errors.join()).not.toContain(TOKEN);
    expect(errorsOf(on('nango_proxy.get', 'path', `/v1/${TOKEN}?x`), catalog).join()).not.toContain(TOKEN);
  });

  it('without a value check (a stand-in catalog, stored rules read back), values are checked for their shape only', () => {
    expect(errorsOf(on('shopify_refund.create', 'currency', 'usd'))).toEqual([]);
    expect(validatePolicyRules(on('shopify_refund.create', 'currency', 'usd')).ok).toBe(true);
  });
});

describe('validatePolicyRules: a name that does not look like one is not repeated in the 400, the names that would do are listed', () => {
  const catalog = realCatalog();
  const TOKEN = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc';
  const SHOPIFY_TOKEN = 'shpat_0123456789abcdef0123456789abcdef';

  it('a where path', () => {
    expect(errorsOf(where(TOKEN, 'shopify_refund.create'), catalog)).toEqual([
      'rules[0] ("r"): where[0].path (not named here as it does not look like a name) is not a param of shopify_refund.create (its params: amount, currency, note, orderId)',
    ]);
    expect(errorsOf(where(`query.${TOKEN}`, 'nango_proxy.get'), catalog)).toEqual([]); // a query member may be named anything
    const nested = errorsOf(where(`${TOKEN}.x`, 'nango_proxy.*'), catalog);
    expect(nested).toEqual([
      'rules[0] ("r"): where[0].path (not named here as it does not look like a name) is not a param of any nango_proxy action (their params: body, path, query)',
    ]);
    expect(errorsOf(where(TOKEN), catalog).join()).not.toContain(TOKEN);
  });

  it('a toolName, "tool.action" or "tool.*"', () => {
    const [action] = errorsOf(where('orderId', `${SHOPIFY_TOKEN}.lookup`), catalog);
    expect(action).toMatch(/^rules\[0\] \("r"\): match\.toolName \(not named here as it does not look like a name\) names no tool action of the catalog \(it has: .*order_lookup\.lookup.*\)$/);
    expect(action).not.toContain(SHOPIFY_TOKEN);
    const [tool] = errorsOf(where('orderId', `${SHOPIFY_TOKEN}.*`), catalog);
    expect(tool).toMatch(/names no tool of the catalog \(it has: .*order_lookup\.\*.*\)$/);
    expect(tool).not.toContain(SHOPIFY_TOKEN);
    // A name that looks like one is still named: the typo is then plain to see.
    expect(errorsOf(where('orderId', 'order_lookups.lookup'), catalog)).toEqual([
      'rules[0] ("r"): match.toolName "order_lookups.lookup" names no tool action of the catalog (GET /v1/tools lists them)',
    ]);
  });
});

describe('patternMayMatchDecimal: whether some decimal text ("-12", "3.5") passes a schema pattern', () => {
  it('says no only when no decimal text of the probes passes', () => {
    const cases: [string, boolean][] = [
      ['^\\d{3}-\\d{7}-\\d{7}$', false], // Amazon's 3-7-7 order id: digits, but never one number
      ['^[A-Z]{3}$', false],
      ['^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$', false],
      ['^\\d+\\.\\d+\\.\\d+$', false],
      ['^\\.5$', false], // no digit before the point: parseDecimal reads no such text
      ['^[^0-9]+$', false],
      ['^a|b$', false],
      ['[]', false],
      ['^(?=x)\\d$', false],
      ['^\\d{1,9}(\\.\\d{1,3})?$', true], // a refund amount
      ['^[1-9][0-9]{0,18}$', true], // a Shopify id
      ['^-?\\d+$', true],
      ['^-\\d+\\.\\d{2}$', true],
      ['^0\\d{5}$', true],
      ['^9{40}$', true],
      ['\\d', true], // unanchored: "5" contains a digit
      ['^a|5$', true],
      ['^[^a-z]+$', true],
      ['^[\\u0030-\\u0039]$', true],
      ['^(\\d)\\1$', true],
      ['(', true], // not a pattern the engine compiles: taken to admit one
    ];
    for (const [pattern, may] of cases) expect(patternMayMatchDecimal(pattern), pattern).toBe(may);
  });
});

describe('validatePolicyRules with the catalog: a rule that could never work on the params the policy sees', () => {
  const catalog = realCatalog();
  const rule = (toolName: string | undefined, where: unknown[]) => [{ id: 'r', match: { ...(toolName === undefined ? {} : { toolName }), where }, decision: 'allow' }];

  it('refuses gt/gte/lt/lte on a param an action takes but never as a number, an exists guard or not', () => {
    expect(errorsOf(rule('amazon_query.get_order', [{ path: 'orderId', op: 'gte', value: 100 }]), catalog)).toEqual([
      'rules[0] ("r"): where[0].path "orderId" is compared (gte) but never holds a number or a decimal text in a call of amazon_query.get_order ' +
        '(GET /v1/tools lists their input schemas): the rule could not be evaluated for those calls and would block them, whatever its decision',
    ]);
    expect(errorsOf(rule('kyc.*', [{ path: 'includeDetails', op: 'exists' }, { path: 'includeDetails', op: 'lte', value: 0 }]), catalog)[0]).toContain('"includeDetails" is compared (lte) but never holds a number');
    expect(errorsOf(rule('nango_proxy.get', [{ path: 'query', op: 'gt', value: 0 }]), catalog)[0]).toContain('"query" is compared (gt) but never holds a number');
    // Some of the matched actions are enough: their calls would all be blocked.
    expect(errorsOf(rule(undefined, [{ path: 'orderId', op: 'exists' }, { path: 'orderId', op: 'gt', value: 1 }]), catalog)[0]).toMatch(/in a call of amazon_query\.get_order, amazon_query\.\w+ \(/);
  });

  it('accepts one that an earlier condition keeps away from the actions whose calls never hold a number there', () => {
    // No toolName: Amazon's calls have no currency, so the eq (after its exists guard, as a refund may leave currency
    // out) is false for them and the comparison is never reached.
    const eurRefunds = [{ path: 'currency', op: 'exists' }, { path: 'currency', op: 'eq', value: 'EUR' }, { path: 'orderId', op: 'exists' }, { path: 'orderId', op: 'gte', value: '6000000000' }];
    expect(errorsOf(rule(undefined, eurRefunds), catalog)).toEqual([]);
    // ne and exists:false hold for a call without their path: they keep nothing away.
    const notEur = [{ path: 'note', op: 'ne', value: 'EUR' }, { path: 'orderId', op: 'exists' }, { path: 'orderId', op: 'gte', value: '6000000000' }];
    expect(errorsOf(rule(undefined, notEur), catalog)[0]).toMatch(/"orderId" is compared \(gte\) but never holds a number or a decimal text in a call of amazon_query\./);
  });

  it('accepts them where a call may hold a number or a decimal text', () => {
    expect(errorsOf(rule('shopify_refund.create', [{ path: 'amount', op: 'gt', value: 100 }]), catalog)).toEqual([]);
    expect(errorsOf(rule('order_lookup.lookup', [{ path: 'orderId', op: 'gte', value: '1000' }]), catalog)).toEqual([]);
    expect(errorsOf(rule('nango_proxy.get', [{ path: 'query.limit', op: 'exists' }, { path: 'query.limit', op: 'lte', value: 100 }]), catalog)).toEqual([]);
    expect(errorsOf(rule('nango_proxy.post', [{ path: 'body.qty', op: 'exists' }, { path: 'body.qty', op: 'lte', value: 100 }]), catalog)).toEqual([]);
  });

  it('refuses exists:false on a param every call holds once its default is filled in, or which the schema requires', () => {
    expect(errorsOf(rule('kyc.get_status', [{ path: 'includeDetails', op: 'exists', value: false }]), catalog)).toEqual([
      'rules[0] ("r"): where[0].path "includeDetails" always holds a value in every call of kyc.get_status ' +
        '(left out, it is filled in with its default before the policy runs): exists false never holds, so the rule would never apply',
    ]);
    expect(errorsOf(rule('shopify_refund.create', [{ path: 'amount', op: 'exists', value: false }]), catalog)[0]).toContain('"amount" always holds a value in every call of shopify_refund.create (it is required)');
  });

  it('accepts exists:false where some call the rule applies to may lack the param', () => {
    expect(errorsOf(rule('shopify_refund.create', [{ path: 'currency', op: 'exists', value: false }]), catalog)).toEqual([]);
    // nango_proxy.post takes no amount: exists:false holds for its calls.
    expect(errorsOf([{ id: 'r', match: { riskLevel: 'high', where: [{ path: 'amount', op: 'exists', value: false }] }, decision: 'allow' }], catalog)).toEqual([]);
    expect(errorsOf(rule('nango_proxy.get', [{ path: 'query.page', op: 'exists', value: false }]), catalog)).toEqual([]);
  });

  it('without the catalog (stored rules read back) neither is checked', () => {
    expect(validatePolicyRules(rule('amazon_query.get_order', [{ path: 'orderId', op: 'gte', value: 100 }])).ok).toBe(true);
    expect(validatePolicyRules(rule('kyc.get_status', [{ path: 'includeDetails', op: 'exists', value: false }])).ok).toBe(true);
  });
});

describe('validatePolicyRules with the catalog: eq, ne and in on a param whose absence stands for a value the policy cannot see', () => {
  const catalog = realCatalog();
  const ACCOUNT = '0b3a8c52-5a4e-4a2f-9d4e-2f6c3b1a7e90';
  const rule = (toolName: string | undefined, where: unknown[], decision = 'block') => [
    { id: 'r', match: { ...(toolName === undefined ? {} : { toolName }), where }, decision },
  ];
  const REFUND_CURRENCY =
    'but a call of shopify_refund.create may leave currency out, and left out, the refund is in the order\'s currency, which the policy cannot see: ' +
    'the rule would judge such a call as if it had no currency (eq and in never hold, ne always does), though the vendor acts on one; ' +
    'put {"path": "currency", "op": "exists"} before it so the rule is for calls that name currency, ' +
    'and a separate rule with {"path": "currency", "op": "exists", "value": false} for those that leave it out';

  it('refuses an unguarded eq, ne or in on the refund currency, naming the path, the action, what absence means and the guard', () => {
    expect(errorsOf(rule('shopify_refund.create', [{ path: 'currency', op: 'eq', value: 'USD' }]), catalog)).toEqual([
      `rules[0] ("r"): where[0].path "currency" is compared (eq) ${REFUND_CURRENCY}`,
    ]);
    expect(errorsOf(rule('shopify_refund.create', [{ path: 'currency', op: 'ne', value: 'USD' }], 'allow'), catalog)).toEqual([
      `rules[0] ("r"): where[0].path "currency" is compared (ne) ${REFUND_CURRENCY}`,
    ]);
    const withAmount = [{ path: 'amount', op: 'exists' }, { path: 'amount', op: 'gt', value: 100 }, { path: 'currency', op: 'in', value: ['USD', 'CAD'] }];
    expect(errorsOf(rule('shopify_refund.*', withAmount, 'require_expert_approval'), catalog)).toEqual([
      `rules[0] ("r"): where[2].path "currency" is compared (in) ${REFUND_CURRENCY}`,
    ]);
  });

  it('refuses one on the kyc accountId, the credentials\' default account standing for it', () => {
    expect(errorsOf(rule('kyc.get_status', [{ path: 'accountId', op: 'eq', value: ACCOUNT }]), catalog)).toEqual([
      'rules[0] ("r"): where[0].path "accountId" is compared (eq) but a call of kyc.get_status may leave accountId out, and left out, ' +
        'the account of the org\'s Jumio credentials is used, which the policy cannot see: the rule would judge such a call as if it had no accountId ' +
        '(eq and in never hold, ne always does), though the vendor acts on one; put {"path": "accountId", "op": "exists"} before it so the rule ' +
        'is for calls that name accountId, and a separate rule with {"path": "accountId", "op": "exists", "value": false} for those that leave it out',
    ]);
  });

  it('reaches the actions the rule applies to: an org-wide rule or one of their risk, not a rule for another tool', () => {
    expect(errorsOf(rule(undefined, [{ path: 'currency', op: 'eq', value: 'USD' }]), catalog)[0]).toContain('"currency" is compared (eq) but a call of shopify_refund.create may leave');
    expect(errorsOf([{ id: 'r', match: { riskLevel: 'medium', where: [{ path: 'accountId', op: 'ne', value: ACCOUNT }] }, decision: 'allow' }], catalog)[0]).toContain(
      'but a call of kyc.get_status may leave accountId out',
    );
    // kyc is medium: a rule on high-risk actions never meets its calls (ne holds on a missing param, so is not "never present").
    expect(errorsOf([{ id: 'r', match: { riskLevel: 'high', where: [{ path: 'accountId', op: 'ne', value: ACCOUNT }] }, decision: 'allow' }], catalog)).toEqual([]);
    // Another tool's params are left as they were: a Shopify orderId, a Nango path, the kyc execution id.
    expect(errorsOf(rule('shopify_refund.create', [{ path: 'orderId', op: 'eq', value: '12345' }]), catalog)).toEqual([]);
    expect(errorsOf(rule('nango_proxy.get', [{ path: 'path', op: 'ne', value: '/v1/admin' }]), catalog)).toEqual([]);
    expect(errorsOf(rule('kyc.get_status', [{ path: 'workflowExecutionId', op: 'in', value: [ACCOUNT] }]), catalog)).toEqual([]);
  });

  it('accepts one after an exists condition on the same path, true or false, and a rule for the calls that leave it out', () => {
    for (const guard of [{ path: 'currency', op: 'exists' }, { path: 'currency', op: 'exists', value: true }, { path: 'currency', op: 'exists', value: false }]) {
      expect(errorsOf(rule('shopify_refund.create', [guard, { path: 'currency', op: 'eq', value: 'USD' }]), catalog), JSON.stringify(guard)).toEqual([]);
    }
    expect(errorsOf(rule('shopify_refund.create', [{ path: 'currency', op: 'exists', value: false }], 'require_expert_approval'), catalog)).toEqual([]);
    expect(errorsOf(rule('kyc.*', [{ path: 'accountId', op: 'exists' }, { path: 'accountId', op: 'in', value: [ACCOUNT] }]), catalog)).toEqual([]);
  });

  it('a guard after the condition, or on another path, does not say which calls the rule is for', () => {
    const after = [{ path: 'currency', op: 'eq', value: 'USD' }, { path: 'currency', op: 'exists' }];
    expect(errorsOf(rule('shopify_refund.create', after), catalog)).toEqual([`rules[0] ("r"): where[0].path "currency" is compared (eq) ${REFUND_CURRENCY}`]);
    const other = [{ path: 'note', op: 'exists' }, { path: 'currency', op: 'eq', value: 'USD' }];
    expect(errorsOf(rule('shopify_refund.create', other), catalog)).toEqual([`rules[0] ("r"): where[1].path "currency" is compared (eq) ${REFUND_CURRENCY}`]);
  });

  it('names a value no call can carry instead (guarded or not it would never match), and leaves gt/gte/lt/lte to the numeric checks', () => {
    expect(errorsOf(rule('shopify_refund.create', [{ path: 'currency', op: 'eq', value: 'usd' }]), catalog)).toEqual([
      'rules[0] ("r"): where[0].value can never match currency: must match pattern "^[A-Z]{3}$"',
    ]);
    // A currency code never holds a number: refused as before, with or without a guard, by neverNumeric alone.
    const [numeric] = errorsOf(rule('shopify_refund.create', [{ path: 'currency', op: 'gt', value: 1 }]), catalog);
    expect(numeric).toContain('"currency" is compared (gt) but never holds a number or a decimal text in a call of shopify_refund.create');
  });

  it('without the catalog (stored rules read back) it is not checked: a policy saved before is read as it is', () => {
    expect(validatePolicyRules(rule('shopify_refund.create', [{ path: 'currency', op: 'eq', value: 'USD' }])).ok).toBe(true);
    expect(validatePolicyRules(rule('kyc.get_status', [{ path: 'accountId', op: 'eq', value: ACCOUNT }])).ok).toBe(true);
  });

  it('groups the actions by what leaving the param out means, and names no path that does not look like a name', () => {
    const stand: KnownTools = {
      ...knownOf([]),
      has: () => true,
      unseenDefaults: () => [
        { action: 'b_tool.get', meaning: 'the default B is used' },
        { action: 'a_tool.get', meaning: 'the default A is used' },
        { action: 'c_tool.get', meaning: 'the default B is used' },
      ],
    };
    expect(errorsOf(rule('a_tool.get', [{ path: 'region', op: 'eq', value: 'x' }]), stand)).toEqual([
      'rules[0] ("r"): where[0].path "region" is compared (eq) but a call of a_tool.get, b_tool.get, c_tool.get may leave region out, and the policy ' +
        'cannot see what stands for it then (a_tool.get: left out, the default A is used; b_tool.get, c_tool.get: left out, the default B is used): ' +
        'the rule would judge such a call as if it had no region (eq and in never hold, ne always does), though the vendor acts on one; ' +
        'put {"path": "region", "op": "exists"} before it so the rule is for calls that name region, ' +
        'and a separate rule with {"path": "region", "op": "exists", "value": false} for those that leave it out',
    ]);
    const pasted = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc';
    const [unnamed] = errorsOf(rule('a_tool.get', [{ path: `region.${pasted}`, op: 'eq', value: 'x' }]), stand);
    expect(unnamed).toMatch(/^rules\[0\] \("r"\): where\[0\]\.path \(not named here as it does not look like a name\) is compared \(eq\) /);
    expect(unnamed).toContain('put an "exists" condition on the same path before it');
    expect(unnamed).not.toContain(pasted);
  });
});
