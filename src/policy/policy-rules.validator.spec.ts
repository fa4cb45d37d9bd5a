import { describe, expect, it } from 'vitest';
import { validatePolicyRules } from './policy-rules.validator.js';

const errorsOf = (input: unknown): string[] => {
  const result = validatePolicyRules(input);
  if (result.ok) throw new Error('expected validation to fail');
  return result.errors;
};

const bigRefunds = {
  id: 'big-refunds',
  match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'gt', value: 100 }] },
  decision: 'require_expert_approval',
  riskLevel: 'high',
  reason: 'refunds over 100 need an expert',
};

describe('validatePolicyRules: valid input', () => {
  it('accepts the API.md example and returns an equal copy', () => {
    const input = [bigRefunds, { id: 'lookups', match: { toolName: 'order_lookup.*' }, decision: 'allow' }];
    const result = validatePolicyRules(input);
    expect(result).toEqual({ ok: true, rules: input });
    if (!result.ok) return;
    expect(result.rules[0]).not.toBe(input[0]);
    expect(result.rules[0]!.match!.where![0]).not.toBe(bigRefunds.match.where[0]);
  });

  it('counts a reason in characters (code points), as the OpenAPI maxLength does: 500 emoji are 500, not 1,000', () => {
    for (const reason of ['😀'.repeat(500), '𠀀'.repeat(300), 'r'.repeat(500)]) {
      expect(validatePolicyRules([{ id: 'r', decision: 'allow', reason }])).toEqual({ ok: true, rules: [{ id: 'r', decision: 'allow', reason }] });
    }
  });

  it('accepts an empty list and a rule with only id and decision', () => {
    expect(validatePolicyRules([])).toEqual({ ok: true, rules: [] });
    expect(validatePolicyRules([{ id: 'all', decision: 'block' }])).toEqual({ ok: true, rules: [{ id: 'all', decision: 'block' }] });
  });

  it('accepts every operator with a suitable value', () => {
    const where = [
      { path: 'a', op: 'eq', value: 'x' },
      { path: 'a', op: 'ne', value: null },
      { path: 'a.b', op: 'eq', value: { nested: [1, 'two', { three: true }] } },
      { path: 'amount', op: 'gt', value: 100 },
      { path: 'amount', op: 'gte', value: '100.50' },
      { path: 'amount', op: 'lt', value: -1 },
      { path: 'amount', op: 'lte', value: '0' },
      { path: 'currency', op: 'in', value: ['USD', 'EUR'] },
      { path: 'note', op: 'exists' },
      { path: 'note', op: 'exists', value: false },
      { path: 'items.0.sku', op: 'eq', value: 'AUR-9' },
    ];
    const result = validatePolicyRules([{ id: 'ops', match: { where }, decision: 'observe' }]);
    expect(result.ok).toBe(true);
  });

  it('accepts ids using the whole allowed alphabet and 100 characters', () => {
    expect(validatePolicyRules([{ id: 'A-z_0.9:x', decision: 'allow' }]).ok).toBe(true);
    expect(validatePolicyRules([{ id: 'a'.repeat(100), decision: 'allow' }]).ok).toBe(true);
  });

  it('drops nothing it was given and adds nothing', () => {
    const result = validatePolicyRules([{ id: 'x', decision: 'allow', match: {} }]);
    expect(result).toEqual({ ok: true, rules: [{ id: 'x', decision: 'allow', match: {} }] });
  });
});

describe('validatePolicyRules: errors name the rule', () => {
  it('reports a bad operator with index and id', () => {
    const errors = errorsOf([
      { id: 'a', decision: 'allow' },
      { id: 'b', decision: 'allow' },
      { ...bigRefunds, match: { where: [{ path: 'amount', op: 'bigger', value: 1 }] } },
    ]);
    expect(errors).toEqual(['rules[2] ("big-refunds"): where[0].op must be one of eq, ne, gt, gte, lt, lte, in, exists']);
  });

  it('names a rule by index alone when its id is unusable', () => {
    expect(errorsOf([{ decision: 'allow' }])[0]).toMatch(/^rules\[0\]: id must be/);
    expect(errorsOf([{ id: 'has space', decision: 'allow' }])[0]).toMatch(/^rules\[0\]: id must be/);
    expect(errorsOf([{ id: 'a'.repeat(101), decision: 'allow' }])[0]).toMatch(/^rules\[0\]: id must be/);
    expect(errorsOf([{ id: '', decision: 'allow' }])[0]).toMatch(/^rules\[0\]: id must be/);
    expect(errorsOf([{ id: 7, decision: 'allow' }])[0]).toMatch(/^rules\[0\]: id must be/);
  });

  it('rejects duplicate ids', () => {
    expect(errorsOf([{ id: 'x', decision: 'allow' }, { id: 'x', decision: 'block' }])).toEqual([
      'rules[1] ("x"): duplicate id, already used by rules[0]',
    ]);
  });

  it('rejects unknown fields at every level', () => {
    expect(errorsOf([{ id: 'x', decision: 'allow', priority: 1 }])).toEqual(['rules[0] ("x"): unknown field "priority"']);
    expect(errorsOf([{ id: 'x', decision: 'allow', match: { tool: 'a.b' } }])).toEqual([
      'rules[0] ("x"): unknown field match."tool"',
    ]);
    expect(errorsOf([{ id: 'x', decision: 'allow', match: { where: [{ path: 'a', op: 'eq', value: 1, not: true }] } }])).toEqual([
      'rules[0] ("x"): unknown field where[0]."not"',
    ]);
  });

  it.each([
    [{ decision: 'maybe' }, 'decision must be one of'],
    [{ decision: undefined }, 'decision must be one of'],
    [{ riskLevel: 'extreme' }, 'riskLevel must be one of low, medium, high'],
    [{ reason: 'r'.repeat(501) }, 'reason must be a string of at most 500'],
    [{ reason: '😀'.repeat(501) }, 'reason must be a string of at most 500'],
    [{ reason: 5 }, 'reason must be a string'],
    [{ match: 'all' }, 'match must be an object'],
    [{ match: null }, 'match must be an object'],
    [{ match: { toolName: 'order_lookup' } }, 'match.toolName must look like'],
    [{ match: { toolName: '*.lookup' } }, 'match.toolName must look like'],
    [{ match: { toolName: 'a.b.c' } }, 'match.toolName must look like'],
    [{ match: { riskLevel: 'HIGH' } }, 'match.riskLevel must be one of'],
    [{ match: { where: {} } }, 'match.where must be an array'],
    [{ match: { where: [null] } }, 'where[0] must be an object'],
    [{ match: { where: [{ op: 'eq', value: 1 }] } }, 'where[0].path must be a dot path'],
    [{ match: { where: [{ path: 'a..b', op: 'exists' }] } }, 'where[0].path segments must be non-empty'],
    [{ match: { where: [{ path: 'a b', op: 'exists' }] } }, 'where[0].path segments must be non-empty'],
    [{ match: { where: [{ path: '__proto__', op: 'exists' }] } }, 'where[0].path may not contain the segment "__proto__"'],
    [{ match: { where: [{ path: 'a.constructor', op: 'exists' }] } }, 'may not contain the segment "constructor"'],
    [{ match: { where: [{ path: 'prototype.x', op: 'exists' }] } }, 'may not contain the segment "prototype"'],
    [{ match: { where: [{ path: 'a'.repeat(201), op: 'exists' }] } }, 'where[0].path must be a dot path'],
    [{ match: { where: [{ path: Array(33).fill('a').join('.'), op: 'exists' }] } }, 'more than 32 segments'],
    [{ match: { where: [{ path: 'a', op: 'eq' }] } }, 'where[0].value is required for eq'],
    [{ match: { where: [{ path: 'a', op: 'in', value: 'x' }] } }, 'where[0].value must be an array for in'],
    [{ match: { where: [{ path: 'a', op: 'in', value: Array(501).fill(1) }] } }, 'at most 500 items'],
    [{ match: { where: [{ path: 'a', op: 'exists', value: 'yes' }] } }, 'must be a boolean for exists'],
    [{ match: { where: [{ path: 'a', op: 'gt', value: 'lots' }] } }, 'must be a finite number or a decimal string for gt'],
    [{ match: { where: [{ path: 'a', op: 'lte', value: '1e400' }] } }, 'for lte'],
    [{ match: { where: [{ path: 'a', op: 'gte', value: null }] } }, 'for gte'],
    [{ match: { where: [{ path: 'a', op: 'lt', value: '' }] } }, 'for lt'],
    [{ match: { where: [{ path: 'a', op: 'eq', value: Infinity }] } }, 'must be JSON data'],
    [{ match: { where: [{ path: 'a', op: 'eq', value: undefined }] } }, 'must be JSON data'],
    [{ match: { where: [{ path: 'a', op: 'eq', value: new Date() }] } }, 'must be JSON data'],
    [{ match: { where: [{ path: 'a', op: 'eq', value: { f: (): number => 1 } }] } }, 'must be JSON data'],
  ])('rejects %j', (patch, message) => {
    const errors = errorsOf([{ id: 'r', decision: 'allow', ...patch }]);
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.every((e) => e.startsWith('rules[0] ("r"): '))).toBe(true);
    expect(errors.join('\n')).toContain(message);
  });

  it('rejects over-deep condition values', () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < 20; i++) deep = { d: deep };
    expect(errorsOf([{ id: 'r', decision: 'allow', match: { where: [{ path: 'a', op: 'eq', value: deep }] } }])[0]).toContain(
      'nested at most 16',
    );
  });

  it('caps the number of rules and conditions', () => {
    const many = Array.from({ length: 201 }, (_, i) => ({ id: `r${i}`, decision: 'allow' }));
    expect(errorsOf(many)).toEqual(['rules: at most 200 rules are allowed (got 201)']);
    expect(validatePolicyRules(many.slice(0, 200)).ok).toBe(true);
    const where = Array.from({ length: 21 }, () => ({ path: 'a', op: 'exists' }));
    expect(errorsOf([{ id: 'r', decision: 'allow', match: { where } }])).toEqual([
      'rules[0] ("r"): match.where holds at most 20 conditions (got 21)',
    ]);
    expect(validatePolicyRules([{ id: 'r', decision: 'allow', match: { where: where.slice(0, 20) } }]).ok).toBe(true);
  });

  it('reports every problem across rules, and caps the list', () => {
    const errors = errorsOf([{ id: 'a', decision: 'nope', riskLevel: 'x' }, 5, { id: 'c', decision: 'allow' }]);
    expect(errors).toEqual([
      'rules[0] ("a"): decision must be one of allow, observe, require_expert_approval, require_client_approval, block',
      'rules[0] ("a"): riskLevel must be one of low, medium, high',
      'rules[1]: must be an object',
    ]);
    const lots = Array.from({ length: 120 }, () => null);
    const capped = errorsOf(lots);
    expect(capped).toHaveLength(51);
    expect(capped[50]).toBe('... and 70 more errors');
  });
});

describe('validatePolicyRules: never throws', () => {
  const weird: unknown[] = [
    null,
    undefined,
    0,
    NaN,
    'rules',
    true,
    {},
    { rules: [] },
    [null],
    [[]],
    [0],
    ['x'],
    [{}],
    [{ id: null, decision: null, match: null }],
    [{ id: {}, decision: [], match: [], reason: {}, riskLevel: [] }],
    [{ id: 'x', decision: 'allow', match: { where: [[], 1, 'x', null, { path: null, op: null }] } }],
    [{ id: 'x', decision: 'allow', match: { where: [{ path: ['a'], op: 'eq', value: 1 }] } }],
    [Object.create(null)],
    [JSON.parse('{"__proto__": {"polluted": true}, "id": "p", "decision": "allow"}')],
    [JSON.parse('{"id": "p", "decision": "allow", "match": {"__proto__": {"toolName": "x.y"}}}')],
    [JSON.parse('{"id": "p", "decision": "allow", "match": {"where": [{"path": "a", "op": "eq", "value": {"__proto__": {"x": 1}}}]}}')],
    [{ id: 'toString', decision: 'constructor' }],
    [{ id: 'x', decision: 'allow', match: { toolName: Symbol('s') } }],
    [{ id: 'x', decision: 'allow', match: { where: [{ path: 'a', op: 'eq', value: 10n }] } }],
    [new Proxy({}, { get: () => { throw new Error('trap'); }, ownKeys: () => { throw new Error('trap'); } })],
    new Proxy([], { get: () => { throw new Error('trap'); } }),
  ];

  it.each(weird.map((w, i) => [i, w]))('case %i', (_i, input) => {
    let result: ReturnType<typeof validatePolicyRules> | undefined;
    expect(() => {
      result = validatePolicyRules(input);
    }).not.toThrow();
    expect(result).toBeDefined();
    if (result && !result.ok) {
      expect(result.errors.length).toBeGreaterThan(0);
      for (const e of result.errors) expect(typeof e).toBe('string');
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).toolName).toBeUndefined();
  });

  it('treats a JSON __proto__ key as an unknown field, not as a prototype', () => {
    const errors = errorsOf([JSON.parse('{"__proto__": {"decision": "allow"}, "id": "p"}')]);
    expect(errors).toContain('rules[0] ("p"): unknown field "__proto__"');
    expect(errors.join()).toContain('decision must be one of');
  });

  it('copies a condition value holding a __proto__ key as plain data', () => {
    const input: unknown = JSON.parse('[{"id":"p","decision":"allow","match":{"where":[{"path":"a","op":"eq","value":{"__proto__":{"x":1}}}]}}]');
    const result = validatePolicyRules(input);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const value = result.rules[0]!.match!.where![0]!.value as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.hasOwn(value, '__proto__')).toBe(true);
    expect((value as { x?: unknown }).x).toBeUndefined();
  });

  it('survives random garbage', () => {
    const atoms: unknown[] = [null, 0, -1, 1.5, '', 'x', 'eq', 'gt', 'allow', true, [], {}, '__proto__', 'constructor'];
    let seed = 7;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const gen = (depth: number): unknown => {
      const pick = rand(depth > 3 ? 2 : 4);
      if (pick === 0) return atoms[rand(atoms.length)];
      if (pick === 1) return { id: `r${rand(5)}`, decision: atoms[rand(atoms.length)], match: gen(depth + 1) };
      if (pick === 2) return Array.from({ length: rand(4) }, () => gen(depth + 1));
      const keys = ['id', 'decision', 'match', 'where', 'path', 'op', 'value', 'toolName', '__proto__', 'riskLevel'];
      const out: Record<string, unknown> = {};
      for (let i = rand(5); i > 0; i--) Object.defineProperty(out, keys[rand(keys.length)]!, { value: gen(depth + 1), enumerable: true, configurable: true, writable: true });
      return out;
    };
    for (let i = 0; i < 500; i++) {
      const input = Array.from({ length: rand(4) }, () => gen(0));
      expect(() => validatePolicyRules(input)).not.toThrow();
    }
    expect(({} as Record<string, unknown>).id).toBeUndefined();
  });
});

describe('validatePolicyRules with the catalog', () => {
  const known = { has: (k: string) => ['shopify_refund.create', 'order_lookup.lookup'].includes(k), isTool: (t: string) => ['shopify_refund', 'order_lookup'].includes(t), paramsOf: () => undefined };
  const rule = (toolName: string) => [{ id: 'r', match: { toolName }, decision: 'block' }];

  it('accepts tool.action and tool.* that the catalog has', () => {
    expect(validatePolicyRules(rule('shopify_refund.create'), known).ok).toBe(true);
    expect(validatePolicyRules(rule('shopify_refund.*'), known).ok).toBe(true);
  });

  it('refuses a name the catalog does not have (matched exactly, a typo would never apply and a block rule would fail open)', () => {
    for (const name of ['Shopify_refund.create', 'shopify_refunds.*', 'shopify_refund.Create', 'shopify_refund.delete']) {
      const out = validatePolicyRules(rule(name), known);
      expect(out.ok, name).toBe(false);
      expect(out.ok ? '' : out.errors.join(';'), name).toContain('names no tool');
    }
  });

  it('without the catalog (stored rules read back), the name is only checked for its shape', () => {
    expect(validatePolicyRules(rule('shopify_refunds.*')).ok).toBe(true);
  });
});
