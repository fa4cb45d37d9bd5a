import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';
import { allow, createRun, deny, eventsOf, expectProblem, putPermissions, withoutCorrelation, type RunBody } from './governance.helpers.js';

/** The org's permissions for these tests (restored after the test that changes them). */
const BASE_PERMISSIONS = [
  allow('order_lookup', 'lookup'),
  allow('kyc', 'get_status'),
  allow('amazon_query', 'get_order'),
  allow('amazon_query', 'get_order_items'),
  allow('nango_proxy', 'get'),
  deny('nango_proxy', 'post'),
  allow('shopify_refund', 'create', 'refund-bot'),
];

interface CatalogTool {
  name: string;
  actions: { name: string; inputSchema: { properties: Record<string, unknown>; required?: string[] } }[];
}

interface ModelSchema {
  type: string;
  properties: Record<string, unknown> & { action: { type: string; enum: string[] } };
  required: string[];
}

interface AnthropicTool {
  name: string;
  description: string;
  input_schema: ModelSchema;
}

interface OpenAiTool {
  type: string;
  function: { name: string; description: string; parameters: ModelSchema; strict?: boolean };
}

const SPECIALIST = 'support-bot';

describe('runs (POST /v1/runs, GET /v1/runs/:runId, GET /v1/runs/:runId/tools)', () => {
  let t: TestApp;
  let org: string;
  let admin: { key: string; id: string };
  let agent: { key: string; id: string };
  let ops: { key: string; id: string };
  let catalog: CatalogTool[];

  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Runs Co');
    admin = await createKey(t, org, 'admin');
    agent = await createKey(t, org, 'agent');
    ops = await createKey(t, org, 'ops');
    catalog = (await t.http.get('/v1/tools').set(bearer(agent.key))).body.items as CatalogTool[];
    await putPermissions(t, org, admin.key, BASE_PERMISSIONS);
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Model-facing params of a catalog action, i.e. its inputSchema properties. */
  const paramsOf = (tool: string, action: string): string[] =>
    Object.keys(catalog.find((c) => c.name === tool)!.actions.find((a) => a.name === action)!.inputSchema.properties);

  describe('POST /v1/runs', () => {
    it('creates a running run with the manifest snapshot and a run.created event', async () => {
      const res = await t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: SPECIALIST, conversationId: 'conv-1', metadata: { ticket: 'T-1' } });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      const run = res.body as RunBody;
      expect(run).toMatchObject({
        id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
        orgId: org,
        specialistId: SPECIALIST,
        status: 'running',
        pendingApprovalCount: 0,
        totalCostCents: 0,
        manifest: { allowedTools: ['amazon_query.get_order', 'amazon_query.get_order_items', 'kyc.get_status', 'nango_proxy.get', 'order_lookup.lookup'] },
        createdAt: expect.any(String),
      });
      expect(new Date(run.createdAt).toISOString()).toBe(run.createdAt);
      expect(Math.abs(Date.now() - Date.parse(run.createdAt))).toBeLessThan(60_000);

      const events = (await eventsOf(t, org, 'run.created')).filter((e) => e.run_id === run.id);
      expect(events).toHaveLength(1);
      expect(events[0].actor).toEqual({ keyId: agent.id, role: 'agent', correlationId: expect.stringMatching(/^[0-9a-f-]{36}$/) }); // the request's, as echoed
      expect(events[0].metadata).toMatchObject({ specialistId: SPECIALIST, allowedToolCount: 5 });
      // The caller's free-form metadata stays out of the event.
      expect(JSON.stringify(events[0])).not.toContain('T-1');
    });

    it("gives each specialist its own manifest (the org's rows plus its own)", async () => {
      const refund = await createRun(t, agent.key, 'refund-bot');
      expect(refund.manifest.allowedTools).toContain('shopify_refund.create');
      expect((await createRun(t, agent.key, SPECIALIST)).manifest.allowedTools).not.toContain('shopify_refund.create');
    });

    it('keeps the manifest a snapshot: later permission changes reach new runs only', async () => {
      const before = await createRun(t, agent.key, SPECIALIST);
      const toolsBefore = (await t.http.get(`/v1/runs/${before.id}/tools?format=anthropic`).set(bearer(agent.key))).body as unknown;

      await putPermissions(t, org, admin.key, [allow('order_lookup', 'lookup'), allow('shopify_query', 'get_product')]);
      try {
        const reread = await t.http.get(`/v1/runs/${before.id}`).set(bearer(agent.key));
        expect(reread.status).toBe(200);
        expect(reread.body.manifest).toEqual(before.manifest);
        expect((await t.http.get(`/v1/runs/${before.id}/tools?format=anthropic`).set(bearer(agent.key))).body).toEqual(toolsBefore);

        const after = await createRun(t, agent.key, SPECIALIST);
        expect(after.manifest.allowedTools).toEqual(['order_lookup.lookup', 'shopify_query.get_product']);
      } finally {
        await putPermissions(t, org, admin.key, BASE_PERMISSIONS);
      }
    });

    it('creates a run with an empty manifest when nothing is permitted', async () => {
      const empty = await createOrg(t, 'Empty Co');
      const emptyAgent = await createKey(t, empty, 'agent');
      const run = await createRun(t, emptyAgent.key, SPECIALIST);
      expect(run.manifest).toEqual({ allowedTools: [] });
      const tools = await t.http.get(`/v1/runs/${run.id}/tools`).set(bearer(emptyAgent.key));
      expect(tools.status).toBe(200);
      expect(tools.body).toEqual({ tools: [] });
    });

    // API.md §1: admin may do "everything above", so an org admin creates runs in its org; the platform admin has no org (403).
    it('is for agent and org admin keys (403 for ops, expert and the platform admin)', async () => {
      const expert = await createKey(t, org, 'expert');
      for (const key of [ops.key, expert.key]) {
        expectProblem(await t.http.post('/v1/runs').set(bearer(key)).send({ specialistId: SPECIALIST }), 403, 'FORBIDDEN');
      }
      const byAdmin = await t.http.post('/v1/runs').set(bearer(admin.key)).send({ specialistId: SPECIALIST });
      expect(byAdmin.status).toBe(201);
      expect(byAdmin.body).toMatchObject({ orgId: org, specialistId: SPECIALIST, status: 'running' });
      expectProblem(await t.http.post('/v1/runs').set(adminAuth).send({ specialistId: SPECIALIST }), 403, 'FORBIDDEN');
      expectProblem(await t.http.post('/v1/runs').send({ specialistId: SPECIALIST }), 401, 'UNAUTHENTICATED');
    });

    it('refuses an invalid specialistId with 400 naming it', async () => {
      for (const specialistId of ['', '   ', 'has space', 'x'.repeat(500), 'tab\there', 'ünïcode', 42, null]) {
        const res = await t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId });
        expectProblem(res, 400, 'VALIDATION_FAILED');
        expect(res.body.detail, String(specialistId).slice(0, 20)).toContain('specialistId');
      }
      const missing = await t.http.post('/v1/runs').set(bearer(agent.key)).send({});
      expectProblem(missing, 400, 'VALIDATION_FAILED');
      expect(missing.body.detail).toContain('specialistId');
      expectProblem(await t.http.post('/v1/runs').set(bearer(agent.key)), 400, 'VALIDATION_FAILED');
    });

    it('refuses unknown body fields, a bad conversationId and non-object metadata', async () => {
      const unknown = await t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: SPECIALIST, allowedTools: ['shopify_refund.create'] });
      expectProblem(unknown, 400, 'VALIDATION_FAILED');
      expect(unknown.body.detail).toContain('allowedTools');

      const conv = await t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: SPECIALIST, conversationId: 'c'.repeat(201) });
      expectProblem(conv, 400, 'VALIDATION_FAILED');
      expect(conv.body.detail).toContain('conversationId');

      for (const metadata of [[1, 2], 'text', 7]) {
        const res = await t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: SPECIALIST, metadata });
        expectProblem(res, 400, 'VALIDATION_FAILED');
        expect(res.body.detail).toContain('metadata');
      }
    });

    it('caps metadata at 16 KiB of JSON', async () => {
      const over = await t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: SPECIALIST, metadata: { blob: 'x'.repeat(17 * 1024) } });
      expectProblem(over, 400, 'VALIDATION_FAILED');
      expect(over.body.detail).toContain('metadata');
      // Counted in bytes, not characters.
      const wide = await t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: SPECIALIST, metadata: { blob: 'é'.repeat(9 * 1024) } });
      expectProblem(wide, 400, 'VALIDATION_FAILED');

      const under = await t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: SPECIALIST, metadata: { blob: 'x'.repeat(15 * 1024) } });
      expect(under.status).toBe(201);
      const reread = await t.http.get(`/v1/runs/${(under.body as RunBody).id}`).set(bearer(agent.key));
      expect(reread.body.metadata).toEqual({ blob: 'x'.repeat(15 * 1024) });
    });
  });

  describe('GET /v1/runs/:runId', () => {
    let run: RunBody;
    let other: { agent: string; admin: string; ops: string };

    beforeAll(async () => {
      run = await createRun(t, agent.key, SPECIALIST);
      const otherOrg = await createOrg(t, 'Other Runs Co');
      other = {
        agent: (await createKey(t, otherOrg, 'agent')).key,
        admin: (await createKey(t, otherOrg, 'admin')).key,
        ops: (await createKey(t, otherOrg, 'ops')).key,
      };
    });

    it('returns the run to its agent, ops and admin keys, and to platform keys', async () => {
      const platformOps = await createKey(t, null, 'ops');
      for (const key of [agent.key, ops.key, admin.key, platformOps.key, adminAuth.Authorization.slice(7)]) {
        const res = await t.http.get(`/v1/runs/${run.id}`).set(bearer(key));
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject(run);
      }
    });

    it('answers another agent key of the org exactly like a missing run (404): a run belongs to the agent key that started it', async () => {
      const secondAgent = (await createKey(t, org, 'agent')).key;
      const missing = await t.http.get(`/v1/runs/${randomUUID()}`).set(bearer(secondAgent));
      expectProblem(missing, 404, 'NOT_FOUND');
      for (const path of [`/v1/runs/${run.id}`, `/v1/runs/${run.id}/tools`]) {
        const notTheirs = await t.http.get(path).set(bearer(secondAgent));
        expectProblem(notTheirs, 404, 'NOT_FOUND');
        expect(notTheirs.body.detail).toBe(missing.body.detail);
      }
    });

    it('refuses experts (403)', async () => {
      const expert = await createKey(t, org, 'expert');
      expectProblem(await t.http.get(`/v1/runs/${run.id}`).set(bearer(expert.key)), 403, 'FORBIDDEN');
      expectProblem(await t.http.get(`/v1/runs/${run.id}/tools`).set(bearer(expert.key)), 403, 'FORBIDDEN');
    });

    it("answers another org's run exactly like a missing one (404)", async () => {
      const missing = await t.http.get(`/v1/runs/${randomUUID()}`).set(bearer(other.agent));
      expectProblem(missing, 404, 'NOT_FOUND');
      for (const key of [other.agent, other.admin, other.ops]) {
        const foreign = await t.http.get(`/v1/runs/${run.id}`).set(bearer(key));
        expectProblem(foreign, 404, 'NOT_FOUND');
        expect(withoutCorrelation(foreign.body)).toEqual(withoutCorrelation(missing.body));
        expect(JSON.stringify(foreign.body)).not.toContain(run.id);

        const foreignTools = await t.http.get(`/v1/runs/${run.id}/tools?format=openai`).set(bearer(key));
        const missingTools = await t.http.get(`/v1/runs/${randomUUID()}/tools?format=openai`).set(bearer(key));
        expectProblem(foreignTools, 404, 'NOT_FOUND');
        expect(withoutCorrelation(foreignTools.body)).toEqual(withoutCorrelation(missingTools.body));
      }
    });

    it('answers 404 for a malformed run id', async () => {
      for (const id of ['not-a-uuid', '1', `${run.id}x`, "' OR 1=1 --"]) {
        expectProblem(await t.http.get(`/v1/runs/${encodeURIComponent(id)}`).set(bearer(agent.key)), 404, 'NOT_FOUND');
        expectProblem(await t.http.get(`/v1/runs/${encodeURIComponent(id)}/tools`).set(bearer(agent.key)), 404, 'NOT_FOUND');
      }
    });
  });

  describe('GET /v1/runs/:runId/tools', () => {
    let run: RunBody;
    let anthropic: AnthropicTool[];

    beforeAll(async () => {
      run = await createRun(t, agent.key, SPECIALIST);
      const res = await t.http.get(`/v1/runs/${run.id}/tools?format=anthropic`).set(bearer(agent.key));
      expect(res.status).toBe(200);
      anthropic = (res.body as { tools: AnthropicTool[] }).tools;
    });

    it('format=anthropic: {tools: [{name, description, input_schema}]}, one tool per toolName', () => {
      for (const tool of anthropic) {
        expect(Object.keys(tool).sort()).toEqual(['description', 'input_schema', 'name']);
        expect(tool.description.length).toBeGreaterThan(0);
        expect(tool.input_schema.type).toBe('object');
        expect(tool.input_schema.required).toEqual(['action']);
        expect(tool.input_schema.properties.action).toMatchObject({ type: 'string', enum: expect.any(Array) });
      }
      const names = anthropic.map((x) => x.name);
      // Both vendors accept only these names for a tool.
      for (const name of names) expect(name).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
      expect(new Set(names).size).toBe(names.length);
      expect([...names].sort()).toEqual(['amazon_query', 'kyc', 'nango_proxy', 'order_lookup']);
    });

    it('lists exactly the manifest: the (tool, action) pairs match allowedTools and nothing else', () => {
      const listed = anthropic.flatMap((x) => x.input_schema.properties.action.enum.map((a) => `${x.name}.${a}`)).sort();
      expect(listed).toEqual([...run.manifest.allowedTools].sort());
      const byName = new Map(anthropic.map((x) => [x.name, x]));
      expect([...byName.get('amazon_query')!.input_schema.properties.action.enum].sort()).toEqual(['get_order', 'get_order_items']);
      // nango_proxy.post is denied: not in the enum, and its own param (`body`) is not offered either.
      expect(byName.get('nango_proxy')!.input_schema.properties.action.enum).toEqual(['get']);
      expect(byName.get('nango_proxy')!.input_schema.properties).not.toHaveProperty('body');
    });

    it("offers the union of the permitted actions' params, each as the catalog declares it; one not every action takes says which do", () => {
      let onlySome = 0;
      for (const tool of anthropic) {
        const actions = tool.input_schema.properties.action.enum;
        const expected = new Set(['action', ...actions.flatMap((a) => paramsOf(tool.name, a))]);
        expect(new Set(Object.keys(tool.input_schema.properties)), tool.name).toEqual(expected);
        const catalogTool = catalog.find((c) => c.name === tool.name)!;
        for (const a of actions) {
          const props = catalogTool.actions.find((x) => x.name === a)!.inputSchema.properties;
          for (const [param, schema] of Object.entries(props)) {
            const takers = actions.filter((x) => paramsOf(tool.name, x).includes(param));
            const only = `only for action ${takers.join(' or ')}`;
            const described = (schema as { description?: string }).description;
            const shown = takers.length === actions.length ? schema : { ...(schema as object), description: described === undefined ? only : `${described} (${only})` };
            if (takers.length < actions.length) onlySome++;
            expect(tool.input_schema.properties[param], `${tool.name}.${param}`).toEqual(shown);
          }
        }
      }
      expect(onlySome).toBeGreaterThanOrEqual(0); // counted where this run's tools have such params (src/runs/tool-definitions.spec.ts has nango_proxy's)
    });

    it("says which params each action requires (the schema can only require `action`), and how a Nango path and query are spelt", () => {
      const byName = new Map(anthropic.map((x) => [x.name, x]));
      for (const tool of anthropic) {
        const catalogTool = catalog.find((c) => c.name === tool.name)!;
        for (const a of tool.input_schema.properties.action.enum) {
          const required = catalogTool.actions.find((x) => x.name === a)!.inputSchema.required ?? [];
          if (required.length > 0) expect(tool.description, `${tool.name}.${a}`).toContain(`${a} (requires ${required.join(', ')}):`);
        }
      }
      expect(byName.get('order_lookup')!.description).toContain('lookup (requires orderId):');
      const nango = byName.get('nango_proxy')!.input_schema.properties as Record<string, { description: string }>;
      expect(nango.path.description).toContain('percent-encoded as UTF-8');
      expect(nango.query.description).toContain('connection_id');
    });

    it('format=openai: {tools: [{type: "function", function: {name, description, parameters, strict: false}}]} with the same content', async () => {
      const res = await t.http.get(`/v1/runs/${run.id}/tools?format=openai`).set(bearer(agent.key));
      expect(res.status).toBe(200);
      expect(Object.keys(res.body as object)).toEqual(['tools']);
      const openai = (res.body as { tools: OpenAiTool[] }).tools;
      for (const tool of openai) {
        expect(Object.keys(tool).sort()).toEqual(['function', 'type']);
        expect(tool.type).toBe('function');
        expect(Object.keys(tool.function).sort()).toEqual(['description', 'name', 'parameters', 'strict']);
        // The one schema (optional params, the union of the actions') is no strict-mode schema: said, not left to a default.
        expect(tool.function.strict).toBe(false);
      }
      expect(openai.map((x) => ({ name: x.function.name, description: x.function.description, input_schema: x.function.parameters }))).toEqual(anthropic);
    });

    it('format=openai-responses: the Responses API\'s flat {type: "function", name, description, parameters, strict: false}, with the same content', async () => {
      const res = await t.http.get(`/v1/runs/${run.id}/tools?format=openai-responses`).set(bearer(agent.key));
      expect(res.status).toBe(200);
      const flat = (res.body as { tools: { type: string; name: string; description: string; parameters: ModelSchema; strict: boolean }[] }).tools;
      for (const tool of flat) expect([Object.keys(tool).sort(), tool.type, tool.strict]).toEqual([['description', 'name', 'parameters', 'strict', 'type'], 'function', false]);
      expect(flat.map((x) => ({ name: x.name, description: x.description, input_schema: x.parameters }))).toEqual(anthropic);
    });

    it('defaults to the anthropic format', async () => {
      const res = await t.http.get(`/v1/runs/${run.id}/tools`).set(bearer(agent.key));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ tools: anthropic });
    });

    it('gives the same tools to ops and admin of the org', async () => {
      for (const key of [ops.key, admin.key]) {
        const res = await t.http.get(`/v1/runs/${run.id}/tools?format=anthropic`).set(bearer(key));
        expect(res.status).toBe(200);
        expect(res.body).toEqual({ tools: anthropic });
      }
    });

    it('agrees with the manifest for a specialist with its own grants', async () => {
      const refund = await createRun(t, agent.key, 'refund-bot');
      const res = await t.http.get(`/v1/runs/${refund.id}/tools?format=openai`).set(bearer(agent.key));
      const pairs = (res.body as { tools: OpenAiTool[] }).tools.flatMap((x) => x.function.parameters.properties.action.enum.map((a) => `${x.function.name}.${a}`));
      expect(pairs.sort()).toEqual([...refund.manifest.allowedTools].sort());
      expect(pairs).toContain('shopify_refund.create');
    });

    it('refuses an unknown format with 400 naming it', async () => {
      for (const q of ['format=xml', 'format=', 'format=ANTHROPIC', 'format=anthropic&format=openai', 'format=responses']) {
        const res = await t.http.get(`/v1/runs/${run.id}/tools?${q}`).set(bearer(agent.key));
        expectProblem(res, 400, 'VALIDATION_FAILED');
        expect(res.body.detail, q).toContain('format');
      }
      const extra = await t.http.get(`/v1/runs/${run.id}/tools?format=openai&verbose=1`).set(bearer(agent.key));
      expectProblem(extra, 400, 'VALIDATION_FAILED');
      expect(extra.body.detail).toContain('verbose');
    });
  });
});
