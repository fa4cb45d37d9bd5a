import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

interface CatalogAction {
  name: string;
  description: string;
  inputSchema: { type: string; properties: Record<string, { type?: string }>; required?: string[]; additionalProperties?: unknown };
  riskLevel: string;
  sideEffect: string;
  idempotent: boolean;
  overwrite?: boolean;
  decimalParams?: string[];
  pathParams?: string[];
  textParams?: string[];
  unseenDefaults?: Record<string, string>;
  costCents: number;
}

interface CatalogTool {
  name: string;
  vendor: string;
  description: string;
  actions: CatalogAction[];
}

interface Expected {
  vendor: string;
  required: string[];
  optional: string[];
  risk: 'low' | 'medium' | 'high';
  sideEffect: 'read' | 'write';
}

/** API.md §2, the table the catalog must ship. */
const TABLE: Record<string, Expected> = {
  'order_lookup.lookup': { vendor: 'shopify', required: ['orderId'], optional: [], risk: 'low', sideEffect: 'read' },
  'shopify_query.get_product': { vendor: 'shopify', required: ['productId'], optional: [], risk: 'low', sideEffect: 'read' },
  'shopify_order.add_note': { vendor: 'shopify', required: ['orderId', 'note'], optional: [], risk: 'medium', sideEffect: 'write' },
  'shopify_refund.create': { vendor: 'shopify', required: ['orderId', 'amount'], optional: ['note'], risk: 'high', sideEffect: 'write' },
  'amazon_query.get_order': { vendor: 'amazon', required: ['orderId'], optional: [], risk: 'low', sideEffect: 'read' },
  'amazon_query.get_order_items': { vendor: 'amazon', required: ['orderId'], optional: [], risk: 'low', sideEffect: 'read' },
  'kyc.get_status': { vendor: 'jumio', required: ['workflowExecutionId'], optional: [], risk: 'medium', sideEffect: 'read' },
  'nango_proxy.get': { vendor: 'nango', required: ['path'], optional: ['query'], risk: 'medium', sideEffect: 'read' },
  'nango_proxy.post': { vendor: 'nango', required: ['path', 'body'], optional: [], risk: 'high', sideEffect: 'write' },
};

describe('GET /v1/tools — the tool catalog', () => {
  let t: TestApp;
  let tools: CatalogTool[];
  const actions = new Map<string, { tool: CatalogTool; action: CatalogAction }>();

  beforeAll(async () => {
    t = await startTestApp();
    const org = await createOrg(t, 'Catalog Co');
    const agent = await createKey(t, org, 'agent');
    const res = await t.http.get('/v1/tools').set(bearer(agent.key));
    expect(res.status).toBe(200);
    tools = (res.body as { items: CatalogTool[] }).items;
    for (const tool of tools) for (const action of tool.actions) actions.set(`${tool.name}.${action.name}`, { tool, action });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('answers {items: [tool...]} with each tool named once and carrying its vendor and actions', async () => {
    const res = await t.http.get('/v1/tools').set(bearer((await createKey(t, null, 'admin')).key));
    expect(res.headers['content-type']).toMatch(/application\/json/);
    expect(Object.keys(res.body as object)).toEqual(['items']);
    expect(Array.isArray(tools)).toBe(true);
    expect(new Set(tools.map((x) => x.name)).size).toBe(tools.length);
    for (const tool of tools) {
      expect(Object.keys(tool).sort()).toEqual(['actions', 'description', 'name', 'vendor']);
      expect(tool).toMatchObject({ name: expect.any(String), vendor: expect.any(String), description: expect.any(String) });
      expect(tool.name).toMatch(/^[a-z0-9_]+$/);
      expect(tool.description.length).toBeGreaterThan(0);
      expect(tool.actions.length).toBeGreaterThan(0);
      expect(new Set(tool.actions.map((a) => a.name)).size).toBe(tool.actions.length);
    }
  });

  it('ships every action of the API.md §2 table with its vendor, params, risk and side effect', () => {
    for (const [key, want] of Object.entries(TABLE)) {
      const found = actions.get(key);
      expect(found, `${key} is missing from the catalog`).toBeDefined();
      const { tool, action } = found!;
      expect(tool.vendor, key).toBe(want.vendor);
      expect(action.riskLevel, key).toBe(want.risk);
      expect(action.sideEffect, key).toBe(want.sideEffect);
      expect([...(action.inputSchema.required ?? [])].sort(), key).toEqual([...want.required].sort());
      for (const p of [...want.required, ...want.optional]) expect(action.inputSchema.properties, `${key} param ${p}`).toHaveProperty(p);
    }
  });

  it('declares every action completely: description, a JSON Schema object, risk, side effect, idempotent, cost (and, for a write, whether it is an overwrite)', () => {
    const ajv = new Ajv({ strict: true, allowUnionTypes: true });
    for (const [key, { action }] of actions) {
      const fields = ['costCents', 'description', 'idempotent', 'inputSchema', 'name', 'riskLevel', 'sideEffect'];
      // Every write decides whether a 5xx answer leaves it unknown (indeterminate) or failed.
      if (action.sideEffect === 'write') fields.push('overwrite');
      // Decimal params (amounts), compared by value in policy rules: each one a declared param.
      if (action.decimalParams !== undefined) {
        fields.push('decimalParams');
        for (const p of action.decimalParams) expect(action.inputSchema.properties, `${key} decimal param ${p}`).toHaveProperty(p);
      }
      if (action.pathParams !== undefined) {
        fields.push('pathParams');
        for (const p of action.pathParams) expect(action.inputSchema.properties, `${key} path param ${p}`).toHaveProperty(p);
      }
      if (action.textParams !== undefined) {
        fields.push('textParams');
        for (const p of action.textParams) expect(action.inputSchema.properties, `${key} text param ${p}`).toHaveProperty(p);
      }
      // Optional params whose absence stands for a value the policy cannot see: each a declared param a call may leave out.
      if (action.unseenDefaults !== undefined) {
        fields.push('unseenDefaults');
        for (const [p, meaning] of Object.entries(action.unseenDefaults)) {
          expect(action.inputSchema.properties, `${key} unseen default ${p}`).toHaveProperty(p);
          expect(action.inputSchema.required ?? [], `${key} unseen default ${p}`).not.toContain(p);
          expect(meaning.length, `${key} unseen default ${p}`).toBeGreaterThan(0);
        }
      }
      expect(Object.keys(action).sort(), key).toEqual(fields.sort());
      if (action.sideEffect === 'write') expect(typeof action.overwrite, key).toBe('boolean');
      expect(action.description.length, key).toBeGreaterThan(0);
      expect(['low', 'medium', 'high'], key).toContain(action.riskLevel);
      expect(['read', 'write'], key).toContain(action.sideEffect);
      expect(typeof action.idempotent, key).toBe('boolean');
      expect(Number.isInteger(action.costCents) && action.costCents >= 0, `${key} costCents ${action.costCents}`).toBe(true);

      const schema = action.inputSchema;
      expect(schema.type, key).toBe('object');
      expect(typeof schema.properties, key).toBe('object');
      for (const r of schema.required ?? []) expect(schema.properties, `${key} requires ${r}`).toHaveProperty(r);
      // Unknown params are refused, and the model-facing `action` key can never collide with a param.
      expect(schema.additionalProperties, key).toBe(false);
      expect(schema.properties, key).not.toHaveProperty('action');
      // A real JSON Schema, as the gateway's validator compiles it.
      expect(() => ajv.compile(schema), key).not.toThrow();
    }
  });

  it('names the params whose absence stands for a value the policy cannot see (refund currency, kyc accountId), outside the input schema', () => {
    const marked = [...actions].filter(([, { action }]) => action.unseenDefaults !== undefined).map(([key, { action }]) => [key, Object.keys(action.unseenDefaults!)]);
    expect(marked).toEqual([
      ['shopify_refund.create', ['currency']],
      ['kyc.get_status', ['accountId']],
    ]);
    // The schema the model reads holds only standard keywords: the mark is the action's, not the param's.
    expect(JSON.stringify(actions.get('shopify_refund.create')!.action.inputSchema)).not.toMatch(/unseen/i);
  });

  it('marks the writes that must never be retried blindly', () => {
    const reads = [...actions].filter(([, { action }]) => action.sideEffect === 'read');
    for (const [key, { action }] of reads) expect(action.idempotent, key).toBe(true);
    expect(actions.get('nango_proxy.post')!.action.idempotent).toBe(false);
    // add_note sets the final text, so a resend changes nothing (API.md §2).
    expect(actions.get('shopify_order.add_note')!.action.idempotent).toBe(true);
  });

  it('describes params the way the table says (checked by compiling the schemas)', () => {
    const ajv = new Ajv({ strict: true, allowUnionTypes: true });
    const check = (key: string, params: unknown): boolean => ajv.compile(actions.get(key)!.action.inputSchema)(params);
    expect(check('order_lookup.lookup', { orderId: '450789469' })).toBe(true);
    expect(check('order_lookup.lookup', { orderId: 450789469 })).toBe(false);
    expect(check('order_lookup.lookup', { orderId: 'gid://shopify/Order/1' })).toBe(false);
    expect(check('order_lookup.lookup', {})).toBe(false);
    expect(check('order_lookup.lookup', { orderId: '1', extra: true })).toBe(false);
    expect(check('shopify_refund.create', { orderId: '1', amount: '19.99' })).toBe(true);
    expect(check('shopify_refund.create', { orderId: '1', amount: '19.99', note: 'damaged' })).toBe(true);
    expect(check('shopify_refund.create', { orderId: '1', amount: 19.99 })).toBe(false);
    expect(check('amazon_query.get_order', { orderId: '112-0000001-1234567' })).toBe(true);
    expect(check('amazon_query.get_order', { orderId: '112-000001-1234567' })).toBe(false);
    expect(check('kyc.get_status', { workflowExecutionId: '6f1b1f4e-3c2a-4d5e-8f9a-0b1c2d3e4f5a' })).toBe(true);
    expect(check('kyc.get_status', { workflowExecutionId: 'not-a-uuid' })).toBe(false);
    expect(check('nango_proxy.get', { path: '/v1/customers/42', query: { limit: 10 } })).toBe(true);
    expect(check('nango_proxy.post', { path: '/v1/customers' })).toBe(false);
  });

  it('is readable by every role and identical for each', async () => {
    const org = await createOrg(t, 'Roles Co');
    const bodies: unknown[] = [];
    for (const role of ['agent', 'ops', 'expert', 'admin']) {
      const { key } = await createKey(t, org, role);
      const res = await t.http.get('/v1/tools').set(bearer(key));
      expect(res.status, role).toBe(200);
      bodies.push(res.body);
    }
    for (const b of bodies) expect(b).toEqual({ items: tools });
  });

  it('needs a key (401)', async () => {
    const res = await t.http.get('/v1/tools');
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('UNAUTHENTICATED');
  });
});
