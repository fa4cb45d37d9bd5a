/**
 * The org configuration routes (the org, its feature flags, tool permissions and policies) as the served OpenAPI
 * document describes them agree with what the server does: the policy rule schema is closed and bounded as the
 * validator is, each operation says which roles may call it (ops read, admins change), the fields that take null
 * say so, and the tool-permission list states the cap the body limit sets in practice.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validatePolicyRules } from '../../src/policy/policy-rules.validator.js';
import { listRoutes } from '../support/routes.js';
import { adminAuth, bearer, createKey, createOrg, startTestApp, type TestApp } from '../support/test-app.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of the served document, walked freely
type Schema = Record<string, any>;
interface Operation {
  description?: string;
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { description: string }>;
}
type Doc = { components: { schemas: Record<string, Schema> }; paths: Record<string, Record<string, Operation>> };

const ajv = new Ajv({ allErrors: true, strict: true });
ajv.addVocabulary(['example']);

/** The org, its flags, permissions and policies: what an ops key may read and only an admin change. */
const CONFIG_ROUTE = /^\/v1\/orgs(\/:orgId(\/feature-flags(\/:flag)?|\/tool-permissions|\/policies)?)?$/;

describe('OpenAPI: the org configuration routes', () => {
  let t: TestApp;
  let org: string;
  let admin: string;
  let ops: string;
  let doc: Doc;
  beforeAll(async () => {
    t = await startTestApp();
    org = await createOrg(t, 'Admin Contract Co');
    admin = (await createKey(t, org, 'admin')).key;
    ops = (await createKey(t, org, 'ops')).key;
    doc = (await t.http.get('/openapi.json')).body as Doc;
  });
  afterAll(async () => {
    await t?.close();
  });

  describe('the policy rule schema', () => {
    let rule: Schema;
    let validateRules: ValidateFunction;
    beforeAll(() => {
      const body = doc.paths['/v1/orgs/{orgId}/policies'].put.requestBody!.content['application/json'].schema;
      rule = body.properties.rules.items as Schema;
      validateRules = ajv.compile(body.properties.rules);
    });

    it('is closed at the rule, match and condition levels, as the server is (an unknown field there → 400)', async () => {
      expect([rule.additionalProperties, rule.properties.match.additionalProperties, rule.properties.match.properties.where.items.additionalProperties]).toEqual([false, false, false]);
      for (const extra of [
        { id: 'a', decision: 'observe', note: 'x' },
        { id: 'a', decision: 'observe', match: { tool: 'order_lookup.lookup' } },
        { id: 'a', decision: 'observe', match: { where: [{ path: 'orderId', op: 'exists', not: true }] } },
      ]) {
        const res = await t.http.put(`/v1/orgs/${org}/policies`).set(bearer(admin)).send({ rules: [extra] });
        expect([res.status, res.body.code], JSON.stringify(extra)).toEqual([400, 'VALIDATION_FAILED']);
        expect(validateRules([extra]), JSON.stringify(extra)).toBe(false);
      }
    });

    it('agrees with the validator on the shape of rules: ids, tool names, paths, their lengths and counts', () => {
      const ok = { id: 'r', match: { toolName: 'order_lookup.*', where: [{ path: 'orderId', op: 'eq', value: '1' }] }, decision: 'block' };
      const cond = (c: Schema) => ({ ...ok, match: { where: [{ op: 'exists', ...c }] } });
      const rules: Schema[] = [
        ok,
        { id: 'r', decision: 'allow' },
        { id: 'r.a:b_c-1', decision: 'observe', riskLevel: 'high', reason: 'x'.repeat(500) },
        { id: 'r', decision: 'observe', reason: 'x'.repeat(501) },
        { id: 'x'.repeat(100), decision: 'allow' },
        { id: 'x'.repeat(101), decision: 'allow' },
        { id: 'has blank', decision: 'allow' },
        { id: 'r', decision: 'maybe' },
        { decision: 'allow' },
        { id: 'r' },
        { ...ok, match: { toolName: 'order_lookup' } },
        { ...ok, match: { toolName: 'order_lookup.look up' } },
        { ...ok, match: { riskLevel: 'extreme' } },
        { ...ok, match: { where: Array.from({ length: 20 }, () => ({ path: 'a', op: 'exists' })) } },
        { ...ok, match: { where: Array.from({ length: 21 }, () => ({ path: 'a', op: 'exists' })) } },
        cond({ path: 'a.b_c.$d-e.0' }),
        cond({ path: `${'a'.repeat(199)}b` }),
        cond({ path: 'a'.repeat(201) }),
        cond({ path: Array.from({ length: 32 }, () => 'a').join('.') }),
        cond({ path: Array.from({ length: 33 }, () => 'a').join('.') }),
        cond({ path: 'a..b' }),
        cond({ path: '' }),
        cond({ path: 'a b' }),
        cond({ path: 'a', op: 'between' }),
        cond({ op: 'exists' }),
        cond({ path: 'a', value: true }),
      ];
      const disagreements = rules
        .map((r) => ({ r, documented: validateRules([r]), served: validatePolicyRules([r]).ok }))
        .filter((x) => x.documented !== x.served)
        .map((x) => `${JSON.stringify(x.r).slice(0, 100)}: document ${String(x.documented)}, validator ${String(x.served)}`);
      expect(disagreements).toEqual([]);
      expect(validateRules(Array.from({ length: 201 }, (_, i) => ({ id: `r${i}`, decision: 'allow' })))).toBe(false);
    });

    it('documents what it cannot express: the limits on a condition value (in: at most 500 items, nesting)', () => {
      const value = rule.properties.match.properties.where.items.properties.value as Schema;
      expect(value.description).toMatch(/at most 500 items for in/);
      expect(value.description).toMatch(/nested at most 16 levels/);
      const path = rule.properties.match.properties.where.items.properties.path as Schema;
      expect([path.maxLength, path.description]).toEqual([200, expect.stringMatching(/at most 32 segments/)]);
    });
  });

  it('each operation says which roles may call it, as its @Roles does; ops keys read, only admins change', async () => {
    const routes = listRoutes(t.app).filter((r) => CONFIG_ROUTE.test(r.path));
    expect(routes).toHaveLength(8); // POST, GET the org; GET, PUT a flag; GET, PUT permissions; GET, PUT policies
    for (const r of routes) {
      const operation = doc.paths[r.path.replace(/:(\w+)/g, '{$1}')][r.method.toLowerCase()];
      const what = `${r.method} ${r.path}`;
      expect(r.roles, what).toEqual(r.method === 'GET' ? ['admin', 'ops'] : ['admin']);
      expect(operation.description, what).toMatch(r.method === 'GET' ? /^Roles: admin or ops\. An ops key may read/ : /^Roles: admin\b/);
      if (r.path !== '/v1/orgs') expect(operation.responses['403'].description, what).toBe(r.method === 'GET' ? 'FORBIDDEN: not an admin or ops key' : 'FORBIDDEN: not an admin key');
    }
    const O = bearer(ops);
    for (const p of ['', '/feature-flags', '/tool-permissions', '/policies']) expect((await t.http.get(`/v1/orgs/${org}${p}`).set(O)).status, p).toBe(200);
    const writes = [
      await t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(O).send({ enabled: true }),
      await t.http.put(`/v1/orgs/${org}/tool-permissions`).set(O).send({ items: [] }),
      await t.http.put(`/v1/orgs/${org}/policies`).set(O).send({ rules: [] }),
      await t.http.post('/v1/orgs').set(O).send({ name: 'by ops' }),
    ];
    expect(writes.map((w) => `${w.status} ${w.body.code}`)).toEqual(Array(4).fill('403 FORBIDDEN'));
  });

  it('POST /v1/orgs id and PUT …/feature-flags reason are documented nullable, and null is taken as absent', async () => {
    expect(doc.components.schemas.CreateOrgDto.properties.id).toMatchObject({ type: 'string', nullable: true, format: 'uuid' });
    expect(doc.components.schemas.SetFeatureFlagDto.properties.reason).toMatchObject({ type: 'string', nullable: true, maxLength: 500 });
    const created = await t.http.post('/v1/orgs').set(adminAuth).send({ name: 'Null Id Co', id: null });
    expect(created.status).toBe(201);
    expect(created.body.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-/);
    const flag = await t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(bearer(admin)).send({ enabled: true, reason: null });
    expect([flag.status, flag.body.enabled]).toEqual([200, true]);
    const [row] = (await t.ds.query('SELECT reason FROM feature_flags WHERE org_id = $1 AND flag = $2', [org, 'tool_calling_enabled'])) as { reason: string | null }[];
    expect(row.reason).toBeNull();
  });

  it('PUT tool-permissions documents the cap the 64 KiB body limit sets in practice, and it holds', async () => {
    const items = doc.components.schemas.PutToolPermissionsDto.properties.items as Schema;
    expect(items.maxItems).toBe(1000);
    expect(items.description).toMatch(/64 KiB .*about 700 rows of typical size/);
    const rows = (n: number) => Array.from({ length: n }, (_, i) => ({ toolName: 'order_lookup', action: 'lookup', specialistId: `specialist-${String(i).padStart(4, '0')}`, enabled: true }));
    expect((await t.http.put(`/v1/orgs/${org}/tool-permissions`).set(bearer(admin)).send({ items: rows(690) })).status).toBe(200);
    const tooBig = await t.http.put(`/v1/orgs/${org}/tool-permissions`).set(bearer(admin)).send({ items: rows(720) });
    expect([tooBig.status, tooBig.body.code]).toEqual([413, 'PAYLOAD_TOO_LARGE']);
  });
});
