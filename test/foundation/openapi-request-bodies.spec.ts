/**
 * The requests the served OpenAPI document describes are the ones the routes accept: tool_use bodies, the DTOs'
 * string rules and closed objects, optional bodies, path parameters and headers, and the codes the 400, 403 and
 * 409 descriptions name. Each rule is checked against its authority (parseToolUse, the class-validator metadata)
 * and, where cheap, against the live route: a value valid by the document is accepted, one invalid by it refused.
 */
import { randomUUID } from 'node:crypto';
import { Ajv, type ValidateFunction } from 'ajv';
import { getMetadataStorage } from 'class-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ListApprovalsQuery, ReconcileDto, DecideApprovalDto } from '../../src/approvals/approvals.dto.js';
import { CreateApiKeyDto, ListApiKeysQuery } from '../../src/auth/api-keys.dto.js';
import { LedgerEventsQuery, LedgerVerifyQuery, ToolCallExportQuery, ToolCallListQuery, UsageQuery } from '../../src/ops/ops.dto.js';
import { INTEGRATION_TYPES } from '../../src/credentials/integration-credential.entity.js';
import { FLAG_DEFAULTS } from '../../src/orgs/feature-flags.service.js';
import { ADMIN_BODY_LIMIT, bodyLimitFor, MAX_JSON_DEPTH, TOOL_CALL_BODY_LIMIT } from '../../src/common/http/json-body.js';
import { CreateOrgDto, SetFeatureFlagDto } from '../../src/orgs/orgs.dto.js';
import { PutToolPermissionsDto, ToolPermissionDto } from '../../src/permissions/tool-permissions.dto.js';
import { CreateRunDto, EndRunDto, ToolsQuery } from '../../src/runs/runs.dto.js';
import { ToolCallResultQuery } from '../../src/tool-calls/tool-calls.dto.js';
import { parseToolUse } from '../../src/tool-calls/tool-use.js';
import { TOOL_USE_SCHEMA } from '../../src/tool-calls/tool-use.schema.js';
import { CREDENTIALS, setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer, createKey, createOrg } from '../support/test-app.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON of the served document, walked freely
type Schema = Record<string, any>;
interface Operation {
  parameters?: { name: string; in: string; required?: boolean; schema?: Schema }[];
  requestBody?: { required?: boolean; content: Record<string, { schema: Schema }> };
  responses: Record<string, { description: string; headers?: Record<string, unknown> }>;
}
interface Doc {
  components: { schemas: Record<string, Schema> };
  paths: Record<string, Record<string, Operation>>;
}

/** Every DTO a route takes as its body, by the name of its schema in components.schemas. */
const BODY_DTOS: Record<string, new () => object> = {
  CreateApiKeyDto, CreateOrgDto, SetFeatureFlagDto, ToolPermissionDto, PutToolPermissionsDto, CreateRunDto, EndRunDto, ReconcileDto, DecideApprovalDto,
};

/** Every GET route taking a query DTO, with the DTO whose validators decide its parameters. */
const QUERY_DTOS: [path: string, dto: new () => object][] = [
  ['/v1/tool-calls', ToolCallListQuery],
  ['/v1/tool-calls/export', ToolCallExportQuery],
  ['/v1/ledger/events', LedgerEventsQuery],
  ['/v1/ledger/verify', LedgerVerifyQuery],
  ['/v1/orgs/{orgId}/usage', UsageQuery],
  ['/v1/approvals', ListApprovalsQuery],
  ['/v1/api-keys', ListApiKeysQuery],
  ['/v1/runs/{runId}/tools', ToolsQuery],
  ['/v1/tool-calls/{id}/result', ToolCallResultQuery],
];

const ajv = new Ajv({ allErrors: true, strict: true });
ajv.addVocabulary(['example']);

let h: Harness;
let o: OrgSetup;
let doc: Doc;

beforeAll(async () => {
  h = await startHarness();
  o = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
  doc = (await h.t.http.get('/openapi.json')).body as Doc;
}, 60_000);
afterAll(async () => {
  await h?.close();
});

const op = (method: string, path: string): Operation => {
  const found = doc.paths[path]?.[method];
  if (!found) throw new Error(`${method.toUpperCase()} ${path} is not in the document`);
  return found;
};
const bodySchema = (method: string, path: string): Schema => op(method, path).requestBody!.content['application/json'].schema;
const described = (method: string, path: string, status: number): string => op(method, path).responses[String(status)]?.description ?? '';
const dtoProperty = (dto: string, prop: string): Schema => doc.components.schemas[dto].properties[prop] as Schema;
/** Whether the document says the value is valid for the property. */
const documentedValid = (dto: string, prop: string, value: unknown): boolean => ajv.compile(dtoProperty(dto, prop))(value);

describe('OpenAPI: the tool_use body', () => {
  let validate: ValidateFunction;
  beforeAll(() => {
    validate = ajv.compile(bodySchema('post', '/v1/runs/{runId}/tool-calls'));
  });

  it('the single route and each batch item document TOOL_USE_SCHEMA', () => {
    expect(bodySchema('post', '/v1/runs/{runId}/tool-calls')).toEqual(TOOL_USE_SCHEMA);
    const items = bodySchema('post', '/v1/runs/{runId}/tool-calls:batch').properties.toolUses.items as Schema;
    expect({ ...items, description: TOOL_USE_SCHEMA.description }).toEqual(TOOL_USE_SCHEMA);
    expect(TOOL_USE_SCHEMA).toMatchObject({ required: ['type', 'id', 'name', 'input'], additionalProperties: false });
  });

  it('agrees with parseToolUse on which bodies are tool_use blocks', () => {
    const ok = { type: 'tool_use', id: 'toolu_1', name: 'order_lookup', input: { action: 'lookup', orderId: '1' } };
    const bodies: unknown[] = [
      ok,
      { ...ok, cache_control: { type: 'ephemeral' } },
      { ...ok, caller: { type: 'direct' } },
      { ...ok, caller: { type: 'code_execution_20250825', tool_id: 'srvtoolu_1' }, toolset_name: 'commerce' },
      { ...ok, input: {} },
      { ...ok, id: '!'.repeat(255) },
      { ...ok, id: 'x'.repeat(256) },
      { ...ok, id: '' },
      { ...ok, id: 'toolu 1' },
      { ...ok, id: 'toolu_é' },
      { ...ok, id: 7 },
      { ...ok, name: 'a'.repeat(128) },
      { ...ok, name: 'a'.repeat(129) },
      { ...ok, name: 'shopify.refund-v2_x' },
      { ...ok, name: 'order:lookup' },
      { ...ok, name: 'оrder_lookup' }, // a Cyrillic "о"
      { ...ok, type: 'tool_result' },
      { ...ok, input: [] },
      { ...ok, input: null },
      { ...ok, input: 'lookup' },
      { ...ok, extra: true },
      { type: 'tool_use', id: 'toolu_1', name: 'order_lookup' },
      { id: 'toolu_1', name: 'order_lookup', input: {} },
      [ok],
      'tool_use',
      null,
    ];
    const parses = (b: unknown): boolean => {
      try {
        parseToolUse(b);
        return true;
      } catch {
        return false;
      }
    };
    const disagreements = bodies.filter((b) => validate(b) !== parses(b)).map((b) => JSON.stringify(b).slice(0, 80));
    expect(disagreements).toEqual([]);
  });

  it('the routes accept a body the schema allows and refuse one it does not, per item in a batch', async () => {
    const valid = { ...toolUse('order_lookup', { action: 'lookup', orderId: '12345' }), cache_control: { type: 'ephemeral' } };
    const invalid = toolUse('order_lookup', { action: 'lookup', orderId: '12345' }, 'toolu with blanks');
    expect([validate(valid), validate(invalid)]).toEqual([true, false]);
    const A = bearer(o.agentKey);
    const accepted = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(A).send(valid);
    expect([accepted.status, accepted.body.status]).toEqual([200, 'succeeded']);
    const refused = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(A).send(invalid);
    expect([refused.status, refused.body.code]).toEqual([400, 'BAD_REQUEST']);
    const batch = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls:batch`).set(A).send({ toolUses: [toolUse('order_lookup', { action: 'lookup', orderId: '12345' }), invalid] });
    expect(batch.status).toBe(200);
    expect([batch.body.results[0].status, batch.body.results[1].status, batch.body.results[1].code]).toEqual(['succeeded', 400, 'BAD_REQUEST']);
  });

  it('each 400 description names the codes the route answers; the single route’s 409 names CONFLICT', async () => {
    const A = bearer(o.agentKey);
    const answers = {
      single: [
        await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(A).send({ hello: 'world' }),
        await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(A).set('Idempotency-Key', 'k'.repeat(256)).send(toolUse('order_lookup', { action: 'lookup' })),
      ],
      batch: [
        await h.t.http.post(`/v1/runs/${o.runId}/tool-calls:batch`).set(A).send({ toolUses: [] }),
        await h.t.http.post(`/v1/runs/${o.runId}/tool-calls:batch`).set(A).send({ toolUses: [toolUse('order_lookup', { action: 'lookup' })], extra: 1 }),
        await h.t.http.post(`/v1/runs/${o.runId}/tool-calls:batch`).set(A).set('Idempotency-Key', 'k1').send({ toolUses: [toolUse('order_lookup', { action: 'lookup' })] }),
      ],
    };
    expect(answers.single.map((r) => `${r.status} ${r.body.code}`)).toEqual(['400 BAD_REQUEST', '400 BAD_REQUEST']);
    expect(answers.batch.map((r) => `${r.status} ${r.body.code}`)).toEqual(['400 VALIDATION_FAILED', '400 VALIDATION_FAILED', '400 BAD_REQUEST']);
    expect(described('post', '/v1/runs/{runId}/tool-calls', 400)).toMatch(/^BAD_REQUEST: .*Idempotency-Key/);
    // Its body is refused BAD_REQUEST, never VALIDATION_FAILED; a query parameter it does not take is (as on every route).
    expect(described('post', '/v1/runs/{runId}/tool-calls', 400).replace('VALIDATION_FAILED for a query parameter the route does not take', '')).not.toContain('VALIDATION_FAILED');
    expect(described('post', '/v1/runs/{runId}/tool-calls', 400)).toContain('VALIDATION_FAILED for a query parameter the route does not take');
    expect(described('post', '/v1/runs/{runId}/tool-calls:batch', 400)).toMatch(/^VALIDATION_FAILED: .*BAD_REQUEST: an Idempotency-Key header/);
    // CONFLICT needs the org's flag or policy to change on another replica during every re-decision (tool-calls.service).
    for (const code of ['RUN_NOT_ACTIVE', 'IDEMPOTENCY_IN_PROGRESS', 'CONFLICT']) expect(described('post', '/v1/runs/{runId}/tool-calls', 409)).toContain(code);
  });
});

describe('OpenAPI: DTO bodies', () => {
  it('components.schemas holds exactly the body DTOs (no query DTO) and Problem; each DTO is closed, Problem is not', () => {
    expect(Object.keys(doc.components.schemas).sort()).toEqual([...Object.keys(BODY_DTOS), 'Problem'].sort());
    for (const name of Object.keys(BODY_DTOS)) expect(doc.components.schemas[name].additionalProperties, name).toBe(false);
    expect(doc.components.schemas.Problem.additionalProperties).toBeUndefined();
  });

  it('every string rule of a body DTO validator is documented on its property: pattern, minLength, maxLength', () => {
    const missing: string[] = [];
    for (const [name, dto] of Object.entries(BODY_DTOS)) {
      for (const m of getMetadataStorage().getTargetValidationMetadatas(dto, '', true, false)) {
        const documented = dtoProperty(name, m.propertyName);
        const want = (field: string, value: unknown, absentMeans?: unknown) => {
          if ((documented[field] ?? absentMeans) !== value) missing.push(`${name}.${m.propertyName}.${field}: ${String(documented[field])} ≠ ${String(value)}`);
        };
        const [a, b] = (m.constraints ?? []) as unknown[];
        if (m.name === 'matches') want('pattern', (a as RegExp).source);
        if (m.name === 'isLength' || m.name === 'codePointLength') {
          want('minLength', a, 0);
          want('maxLength', b);
        }
        if (m.name === 'minLength') want('minLength', a);
        if (m.name === 'maxLength') want('maxLength', a);
      }
    }
    expect(missing).toEqual([]);
    // The ones the review found undocumented, so the loop above is known to see them.
    expect(dtoProperty('CreateRunDto', 'specialistId').pattern).toBe('^[A-Za-z0-9._:-]{1,128}$');
    expect(dtoProperty('DecideApprovalDto', 'actionDigest').pattern).toBe('^[0-9a-f]{64}$');
    expect([dtoProperty('ToolPermissionDto', 'toolName').minLength, dtoProperty('ToolPermissionDto', 'action').maxLength]).toEqual([1, 100]);
  });

  it("every string rule of a query DTO validator is documented on its parameter, in every operation taking it (an empty filter is refused, so the document says so)", () => {
    const missing: string[] = [];
    for (const [path, dto] of QUERY_DTOS) {
      const params = op('get', path).parameters ?? [];
      for (const m of getMetadataStorage().getTargetValidationMetadatas(dto, '', true, false)) {
        const documented = params.find((p) => p.in === 'query' && p.name === m.propertyName)?.schema;
        if (!documented) {
          missing.push(`${path} ?${m.propertyName}: not documented`);
          continue;
        }
        const want = (field: string, value: unknown, absentMeans?: unknown) => {
          if ((documented[field] ?? absentMeans) !== value) missing.push(`${path} ?${m.propertyName}.${field}: ${String(documented[field])} ≠ ${String(value)}`);
        };
        const [a, b] = (m.constraints ?? []) as unknown[];
        if (m.name === 'matches') want('pattern', (a as RegExp).source);
        if (m.name === 'isLength' || m.name === 'codePointLength') {
          want('minLength', a, 0);
          want('maxLength', b);
        }
      }
    }
    expect(missing).toEqual([]);
    // The ones the OpenAPI review found undocumented (empty values refused 400), so the loop above is known to see them.
    const param = (path: string, name: string) => op('get', path).parameters!.find((p) => p.name === name)!.schema!;
    expect([param('/v1/tool-calls', 'toolName').minLength, param('/v1/tool-calls', 'cursor').minLength, param('/v1/approvals', 'cursor').maxLength]).toEqual([1, 1, 1024]);
  });

  it('the routes agree: documented-valid strings are accepted, documented-invalid ones refused 400 VALIDATION_FAILED', async () => {
    const A = bearer(o.agentKey);
    const run = (body: Schema) => h.t.http.post('/v1/runs').set(A).send(body);
    const cases: [what: string, documented: boolean, res: { status: number; body: Schema }][] = [
      ['specialistId a.b:c_d-1', documentedValid('CreateRunDto', 'specialistId', 'a.b:c_d-1'), await run({ specialistId: 'a.b:c_d-1' })],
      ['specialistId with a blank', documentedValid('CreateRunDto', 'specialistId', 'support agent'), await run({ specialistId: 'support agent' })],
      ['conversationId with blanks', documentedValid('CreateRunDto', 'conversationId', 'conv 1 ~'), await run({ specialistId: 's', conversationId: 'conv 1 ~' })],
      ['conversationId non-ASCII', documentedValid('CreateRunDto', 'conversationId', 'café-1'), await run({ specialistId: 's', conversationId: 'café-1' })],
    ];
    const perm = (x: Schema) => h.t.http.put(`/v1/orgs/${o.orgId}/tool-permissions`).set(bearer(o.adminKey)).send({ items: [{ toolName: 'order_lookup', action: 'lookup', specialistId: null, enabled: true, ...x }] });
    cases.push(
      ['permission specialistId null', documentedValid('ToolPermissionDto', 'specialistId', null), await perm({})],
      ['permission specialistId with a blank', documentedValid('ToolPermissionDto', 'specialistId', 'support agent'), await perm({ specialistId: 'support agent' })],
      ['permission toolName empty', documentedValid('ToolPermissionDto', 'toolName', ''), await perm({ toolName: '' })],
      ['permission action of 101', documentedValid('ToolPermissionDto', 'action', 'a'.repeat(101)), await perm({ action: 'a'.repeat(101) })],
    );
    const expert = bearer((await createKey(h.t, o.orgId, 'expert')).key);
    // Body validation comes before the approval is looked up: a well-formed digest reaches the lookup (404).
    const decide = (actionDigest: string) => h.t.http.post(`/v1/approvals/${randomUUID()}/decision`).set(expert).send({ decision: 'reject', actionDigest });
    cases.push(
      ['actionDigest lower-case hex', documentedValid('DecideApprovalDto', 'actionDigest', 'ab'.repeat(32)), await decide('ab'.repeat(32))],
      ['actionDigest upper-case hex', documentedValid('DecideApprovalDto', 'actionDigest', 'AB'.repeat(32)), await decide('AB'.repeat(32))],
    );
    const judged = cases.map(([what, documented, res]) => `${what}: ${documented ? 'valid' : 'invalid'} → ${res.status === 400 ? `400 ${res.body.code}` : 'accepted'}`);
    expect(judged).toEqual(cases.map(([what, documented]) => `${what}: ${documented ? 'valid → accepted' : 'invalid → 400 VALIDATION_FAILED'}`));
  });

  it('an unknown field is refused as the closed schemas say, nested items included', async () => {
    const run = await h.t.http.post('/v1/runs').set(bearer(o.agentKey)).send({ specialistId: 'support', extra: 1 });
    const end = await h.t.http.post(`/v1/runs/${o.runId}/complete`).set(bearer(o.agentKey)).send({ reason: 'done', extra: 1 });
    const item = await h.t.http
      .put(`/v1/orgs/${o.orgId}/tool-permissions`)
      .set(bearer(o.adminKey))
      .send({ items: [{ toolName: 'order_lookup', action: 'lookup', specialistId: null, enabled: true, extra: 1 }] });
    expect([run, end, item].map((r) => `${r.status} ${r.body.code}`)).toEqual(['400 VALIDATION_FAILED', '400 VALIDATION_FAILED', '400 VALIDATION_FAILED']);
  });

  it('every request body is closed at its top level, inline ones too: a GET of …/policies sent back whole is invalid by the document, as the server refuses it (an OpenAPI reviewer: it was valid)', async () => {
    const open = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([, x]) => x.requestBody !== undefined)
        .filter(([, x]) => {
          const schema = x.requestBody!.content['application/json'].schema;
          return (schema.$ref ? doc.components.schemas[String(schema.$ref).split('/').pop()!] : schema).additionalProperties !== false;
        })
        .map(([method]) => `${method.toUpperCase()} ${path}`),
    );
    expect(open).toEqual([]);
    const org = await createOrg(h.t, 'Policies sent back');
    const validBody = ajv.compile(bodySchema('put', '/v1/orgs/{orgId}/policies'));
    const current = await h.t.http.get(`/v1/orgs/${org}/policies`).set(adminAuth);
    const rules = [{ id: 'rest', decision: 'allow' }];
    const bodies = [{ ...(current.body as Schema), rules }, { rules, note: 'x' }, { rules }];
    const judged: string[] = [];
    for (const body of bodies) {
      const res = await h.t.http.put(`/v1/orgs/${org}/policies`).set(adminAuth).send(body);
      judged.push(`${Object.keys(body).join('+')}: ${validBody(body) ? 'valid' : 'invalid'} → ${res.status === 200 ? 'accepted' : `${res.status} ${res.body.code}`}`);
    }
    expect(judged).toEqual([
      'rules+version+updatedAt: invalid → 400 VALIDATION_FAILED',
      'rules+note: invalid → 400 VALIDATION_FAILED',
      'rules: valid → accepted',
    ]);
  });

  it('complete and cancel document their body as optional, and take none', async () => {
    for (const path of ['/v1/runs/{runId}/complete', '/v1/runs/{runId}/cancel']) {
      expect(op('post', path).requestBody?.required, path).toBe(false);
      expect(bodySchema('post', path)).toEqual({ $ref: '#/components/schemas/EndRunDto' });
    }
    const A = bearer(o.agentKey);
    for (const action of ['complete', 'cancel']) {
      const run = await h.t.http.post('/v1/runs').set(A).send({ specialistId: 'support' });
      const ended = await h.t.http.post(`/v1/runs/${run.body.id}/${action}`).set(A);
      expect([ended.status, ended.body.status]).toEqual([200, action === 'complete' ? 'completed' : 'cancelled']);
    }
  });
});

describe('OpenAPI: parameters and other answers', () => {
  it('{type} of the credential routes and {flag} carry their closed lists; others answer 404', async () => {
    const params = (name: string) =>
      Object.entries(doc.paths).flatMap(([path, item]) => (path.includes(`{${name}}`) ? Object.values(item).map((x) => x.parameters?.find((p) => p.name === name)) : []));
    expect(params('type').length).toBe(2);
    for (const p of params('type')) expect(p?.schema?.enum).toEqual([...INTEGRATION_TYPES]);
    expect(params('flag').length).toBe(1);
    for (const p of params('flag')) expect(p?.schema?.enum).toEqual(Object.keys(FLAG_DEFAULTS));
    const admin = bearer(o.adminKey);
    const answers = [
      await h.t.http.put(`/v1/orgs/${o.orgId}/integrations/stripe/credentials`).set(admin).send({ config: {} }),
      await h.t.http.delete(`/v1/orgs/${o.orgId}/integrations/stripe/credentials`).set(admin),
      await h.t.http.put(`/v1/orgs/${o.orgId}/feature-flags/dark_mode`).set(admin).send({ enabled: true }),
    ];
    expect(answers.map((r) => `${r.status} ${r.body.code}`)).toEqual(['404 NOT_FOUND', '404 NOT_FOUND', '404 NOT_FOUND']);
  });

  it('X-Correlation-Id is an optional request header of every /v1 operation; a value it cannot take is replaced, not refused', async () => {
    const without = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([, x]) => !x.parameters?.some((p) => p.in === 'header' && p.name === 'X-Correlation-Id' && p.required === false))
        .map(([method]) => `${method} ${path}`),
    );
    expect(without).toEqual([]);
    expect(Object.keys(doc.paths).filter((p) => !p.startsWith('/v1/'))).toEqual([]);
    const given = await h.t.http.get(`/v1/runs/${o.runId}`).set(bearer(o.agentKey)).set('X-Correlation-Id', 'trace/abc:1');
    const blank = await h.t.http.get(`/v1/runs/${o.runId}`).set(bearer(o.agentKey)).set('X-Correlation-Id', 'has blanks');
    expect([given.status, given.headers['x-correlation-id']]).toEqual([200, 'trace/abc:1']);
    expect(blank.status).toBe(200);
    expect(blank.headers['x-correlation-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('the Idempotency-Key header schema is the rule the route enforces: keys valid by it are accepted, others 400 (an OpenAPI reviewer: a bare string)', async () => {
    const schema = op('post', '/v1/runs/{runId}/tool-calls').parameters!.find((p) => p.in === 'header' && p.name === 'Idempotency-Key')!.schema!;
    expect(schema).toMatchObject({ type: 'string', minLength: 1, maxLength: 255 });
    const valid = ajv.compile(schema);
    const A = bearer(o.agentKey);
    const keys = ['k-1', '~'.repeat(255), 'a b', 'k'.repeat(256), 'tab\there', 'café'];
    const judged: string[] = [];
    for (const [i, key] of keys.entries()) {
      const res = await h.t.http
        .post(`/v1/runs/${o.runId}/tool-calls`)
        .set(A)
        .set('Idempotency-Key', key)
        .send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }, `toolu_idem_${i}`));
      judged.push(`${JSON.stringify(key.slice(0, 12))}: ${valid(key) ? 'valid' : 'invalid'} → ${res.status === 400 ? `400 ${res.body.code}` : 'accepted'}`);
    }
    expect(judged).toEqual(keys.map((k, i) => `${JSON.stringify(k.slice(0, 12))}: ${i < 3 ? 'valid → accepted' : 'invalid → 400 BAD_REQUEST'}`));
  });

  it('every route that reads a body, DELETE included, documents 413 naming its limit, 415, and the 400 of JSON nested too deep; the routes agree (an OpenAPI reviewer: DELETE documented neither, 413 named no size)', async () => {
    const wrong: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, x] of Object.entries(item)) {
        if (x.requestBody === undefined && method !== 'delete') continue;
        const where = `${method.toUpperCase()} ${path}`;
        if (!x.responses['413']?.description.includes(`${bodyLimitFor(path) / 1024} KiB`)) wrong.push(`${where} 413: ${x.responses['413']?.description}`);
        if (!x.responses['415']?.description.startsWith('UNSUPPORTED_MEDIA_TYPE')) wrong.push(`${where} 415: ${x.responses['415']?.description}`);
        const depth = path.endsWith(':batch') ? MAX_JSON_DEPTH + 2 : MAX_JSON_DEPTH; // a batch's envelope adds two levels
        if (!x.responses['400']?.description.includes(`nested deeper than ${depth} levels`)) wrong.push(`${where} 400 names no depth ${depth}`);
      }
    }
    expect(wrong).toEqual([]);
    expect([ADMIN_BODY_LIMIT, TOOL_CALL_BODY_LIMIT, MAX_JSON_DEPTH]).toEqual([64 * 1024, 512 * 1024, 32]);
    expect(described('post', '/v1/orgs', 413)).toContain('64 KiB');
    expect(described('post', '/v1/runs/{runId}/tool-calls', 413)).toContain('512 KiB');
    expect(described('post', '/v1/runs', 400)).toContain(`nested deeper than ${MAX_JSON_DEPTH} levels`);

    const json = (text: string) => ({ 'Content-Type': 'application/json', ...bearer(o.adminKey), body: text });
    const send = (method: 'delete' | 'post', url: string, { body, ...headers }: Record<string, string>) => h.t.http[method](url).set(headers).send(body);
    const pad = (bytes: number) => JSON.stringify({ pad: 'a'.repeat(bytes) });
    const deep = (levels: number) => `{"specialistId":"s","x":${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
    const answers = [
      await send('delete', `/v1/api-keys/${randomUUID()}`, { ...json('x'), 'Content-Type': 'text/plain' }),
      await send('delete', `/v1/api-keys/${randomUUID()}`, json(pad(ADMIN_BODY_LIMIT))),
      await send('delete', `/v1/api-keys/${randomUUID()}`, json('{"dryRun":true}')),
      await send('post', '/v1/orgs', { ...json(pad(ADMIN_BODY_LIMIT)), ...adminAuth }),
      await send('post', `/v1/runs/${o.runId}/tool-calls`, { ...json(pad(ADMIN_BODY_LIMIT)), ...bearer(o.agentKey) }),
      await send('post', `/v1/runs/${o.runId}/tool-calls`, { ...json(pad(TOOL_CALL_BODY_LIMIT)), ...bearer(o.agentKey) }),
      await send('post', '/v1/runs', { ...json(deep(MAX_JSON_DEPTH + 1)), ...bearer(o.agentKey) }),
    ];
    expect(answers.map((r) => `${r.status} ${r.body.code}`)).toEqual([
      '415 UNSUPPORTED_MEDIA_TYPE',
      '413 PAYLOAD_TOO_LARGE',
      '400 VALIDATION_FAILED',
      '413 PAYLOAD_TOO_LARGE',
      '400 BAD_REQUEST', // over 64 KiB but within the tool-call routes' 512: read, and refused as no tool_use block
      '413 PAYLOAD_TOO_LARGE',
      '400 BAD_REQUEST',
    ]);
    expect(answers[6].body.detail).toBe(`JSON nesting deeper than ${MAX_JSON_DEPTH}`);
  });

  it('POST /v1/orgs documents the 403 an org admin key gets', async () => {
    const res = await h.t.http.post('/v1/orgs').set(bearer(o.adminKey)).send({ name: 'x' });
    expect([res.status, res.body.code]).toEqual([403, 'FORBIDDEN']);
    expect(described('post', '/v1/orgs', 403)).toMatch(/^FORBIDDEN: .*only a platform admin \(orgId null\) creates orgs/);
  });

  it('DELETE …/credentials describes its 204', async () => {
    expect(described('delete', '/v1/orgs/{orgId}/integrations/{type}/credentials', 204)).toMatch(/deleted/);
    const admin = bearer(o.adminKey);
    expect((await h.t.http.put(`/v1/orgs/${o.orgId}/integrations/nango/credentials`).set(admin).send({ config: CREDENTIALS.nango })).status).toBe(200);
    expect((await h.t.http.delete(`/v1/orgs/${o.orgId}/integrations/nango/credentials`).set(admin)).status).toBe(204);
  });
});
