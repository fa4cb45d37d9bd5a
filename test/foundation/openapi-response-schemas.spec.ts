/**
 * The 200s of the served OpenAPI document carry schemas, and the live answers
 * match them: each answer below is validated with Ajv against the schema its
 * operation documents, with every documented object closed (an undocumented
 * field fails), so the documentation cannot drift from the code.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NIL_UUID } from '../../src/common/ids.js';
import { Sql } from '../../src/db/sql.js';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { approvalFor, aroundStatements, connectionLost, refundUse } from '../approvals/support.js';
import { CREDENTIALS, setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { postApiKey } from '../support/api-keys.js';
import { adminAuth, bearer, createKey, createOrg } from '../support/test-app.js';

type Schema = Record<string, unknown>;
interface Response {
  description: string;
  content?: Record<string, { schema?: Schema }>;
}
interface Doc {
  components: { schemas: Record<string, Schema> };
  paths: Record<string, Record<string, { responses: Record<string, Response> }>>;
}

/**
 * The answers that must document an application/json schema: [method, path, status]. Every success with a
 * body, and the 403 and 422 a tool call answers with the tool-call body (problem+json has its own check).
 */
const JSON_SUCCESSES: [method: string, path: string, status: string][] = [
  ['get', '/v1/tool-calls', '200'],
  ['get', '/v1/tool-calls/{id}', '200'],
  ['get', '/v1/ledger/events', '200'],
  ['get', '/v1/ledger/verify', '200'],
  ['get', '/v1/orgs/{orgId}/usage', '200'],
  ['get', '/v1/orgs/{orgId}', '200'],
  ['get', '/v1/orgs/{orgId}/feature-flags', '200'],
  ['put', '/v1/orgs/{orgId}/feature-flags/{flag}', '200'],
  ['get', '/v1/orgs/{orgId}/tool-permissions', '200'],
  ['put', '/v1/orgs/{orgId}/tool-permissions', '200'],
  ['get', '/v1/orgs/{orgId}/policies', '200'],
  ['put', '/v1/orgs/{orgId}/policies', '200'],
  ['get', '/v1/orgs/{orgId}/integrations', '200'],
  ['put', '/v1/orgs/{orgId}/integrations/{type}/credentials', '200'],
  ['get', '/v1/runs/{runId}/tools', '200'],
  ['get', '/v1/tools', '200'],
  ['post', '/v1/api-keys', '201'],
  ['get', '/v1/api-keys', '200'],
  ['post', '/v1/orgs', '201'],
  ['post', '/v1/runs', '201'],
  ['get', '/v1/runs/{runId}', '200'],
  ['post', '/v1/runs/{runId}/complete', '200'],
  ['post', '/v1/runs/{runId}/cancel', '200'],
  ['post', '/v1/runs/{runId}/tool-calls', '200'],
  ['post', '/v1/runs/{runId}/tool-calls', '202'],
  ['post', '/v1/runs/{runId}/tool-calls', '403'],
  ['post', '/v1/runs/{runId}/tool-calls', '422'],
  ['get', '/v1/tool-calls/{id}/result', '200'],
  ['post', '/v1/runs/{runId}/tool-calls:batch', '200'],
  ['get', '/v1/approvals', '200'],
  ['get', '/v1/approvals/{id}', '200'],
  ['post', '/v1/approvals/{id}/decision', '200'],
  ['post', '/v1/tool-calls/{id}/reconcile', '200'],
];

/**
 * A copy of an OpenAPI 3.0 schema for Ajv in which every object that lists its properties admits no other:
 * the document stays open to additions, the test insists that each field the code sends is documented.
 */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Schema = {};
  for (const [k, v] of Object.entries(schema)) out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v as Schema).map(([p, s]) => [p, closed(s)])) : closed(v);
  if (out.properties !== undefined && out.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}

describe('OpenAPI 200 schemas match the live answers', () => {
  let h: Harness;
  let o: OrgSetup;
  let doc: Doc;
  let ops: string;
  let ajv: Ajv;
  const compiled = new Map<string, ValidateFunction>();

  beforeAll(async () => {
    // No retries: a write whose answer is lost stays indeterminate (the reconcile below needs one).
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600', VENDOR_MAX_RETRIES: '0' });
    o = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
    ops = (await createKey(h.t, o.orgId, 'ops')).key;
    doc = (await h.t.http.get('/openapi.json')).body as Doc;
    // OpenAPI 3.0 is close enough to draft-07 for these schemas; `nullable` is an Ajv keyword, `example` an annotation.
    ajv = new Ajv({ allErrors: true, strict: true });
    ajv.addVocabulary(['example']);
    addFormats.default(ajv, ['uuid', 'date-time']);
  });
  afterAll(async () => {
    await h?.close();
  });

  const documented = (method: string, path: string, status: string): Response => {
    const res = doc.paths[path]?.[method]?.responses[status];
    if (!res) throw new Error(`${method.toUpperCase()} ${path} documents no ${status}`);
    return res;
  };

  const jsonSchema = (method: string, path: string, status = '200'): Schema => {
    const schema = documented(method, path, status).content?.['application/json']?.schema;
    if (!schema) throw new Error(`${method.toUpperCase()} ${path} ${status} has no application/json schema`);
    return schema;
  };

  const validator = (key: string, schema: Schema): ValidateFunction => {
    let v = compiled.get(key);
    if (!v) compiled.set(key, (v = ajv.compile(closed(schema) as Schema)));
    return v;
  };

  /** The body is what the operation's documented schema allows (with nothing undocumented). */
  function expectMatches(method: string, path: string, res: { status: number; body: unknown; headers: Record<string, string> }, status = '200'): void {
    expect(String(res.status), `${method.toUpperCase()} ${path}: ${JSON.stringify(res.body)}`).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const validate = validator(`${method} ${path} ${status}`, jsonSchema(method, path, status));
    const ok = validate(res.body);
    expect(ok ? [] : validate.errors, `${method.toUpperCase()} ${path} answer ${JSON.stringify(res.body).slice(0, 2000)}`).toEqual([]);
  }

  /** The problem+json body is what the Problem schema allows (with nothing undocumented). */
  function expectProblem(res: { status: number; body: unknown; headers: Record<string, string> }, code: string): void {
    expect((res.body as { code?: string }).code, JSON.stringify(res.body)).toBe(code);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    const validate = validator('Problem', doc.components.schemas.Problem);
    const ok = validate(res.body);
    expect(ok ? [] : validate.errors, `${code} answer ${JSON.stringify(res.body)}`).toEqual([]);
  }

  it('every answer documented with an application/json body is listed above, so checked', () => {
    const documentedJson = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item).flatMap(([method, op]) =>
        Object.entries(op.responses)
          .filter(([, res]) => res.content?.['application/json'] !== undefined)
          .map(([status]) => `${method} ${path} ${status}`),
      ),
    );
    expect(documentedJson.sort()).toEqual(JSON_SUCCESSES.map((r) => r.join(' ')).sort());
  });

  it('GET /v1/tool-calls/export documents its 200 as exactly NDJSON and CSV text', () => {
    const content = documented('get', '/v1/tool-calls/export', '200').content ?? {};
    expect(Object.keys(content).sort()).toEqual(['application/x-ndjson', 'text/csv']);
    for (const media of Object.values(content)) expect(media.schema?.type).toBe('string');
  });

  it('each listed answer documents an application/json schema that compiles', () => {
    for (const [method, path, status] of JSON_SUCCESSES) {
      const schema = jsonSchema(method, path, status);
      expect(schema.type ?? schema.oneOf, `${method.toUpperCase()} ${path} ${status} schema`).toBeDefined();
      expect(() => validator(`${method} ${path} ${status}`, schema), `${method.toUpperCase()} ${path} ${status} schema compiles`).not.toThrow();
    }
  });

  it('GET /v1/tools documents the 400 VALIDATION_FAILED it answers to any query parameter', async () => {
    const res = await h.t.http.get('/v1/tools?verbose=1').set(bearer(o.agentKey));
    expect([res.status, res.body.code]).toEqual([400, 'VALIDATION_FAILED']);
    const doc400 = documented('get', '/v1/tools', '400');
    expect(Object.keys(doc400.content ?? {})).toContain(String(res.headers['content-type']).split(';')[0]);
    expect(doc400.description).toContain('VALIDATION_FAILED');
  });

  it('the tool-call ledger: pages, each call’s story and the export lines match the documented ToolCall', async () => {
    const A = bearer(o.agentKey);
    const call = (body: object) => h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(A).send(body);
    const succeeded = await call(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(succeeded.body.status).toBe('succeeded');
    const waiting = await call(refundUse('1.00'));
    expect(waiting.status).toBe(202);
    const blocked = await call(toolUse('shopify_order', { action: 'add_note', orderId: '1', note: 'x' }));
    expect([blocked.status, blocked.body.errorCode]).toEqual([403, 'NOT_IN_MANIFEST']);
    const invalid = await call(toolUse('order_lookup', { action: 'lookup' }));
    expect([invalid.status, invalid.body.errorCode]).toEqual([422, 'INVALID_INPUT']);
    // One decided approval, so the story shows decidedBy and decidedAt set.
    const expert = await createKey(h.t, o.orgId, 'expert');
    const rejectMe = await call(refundUse('2.00'));
    const approval = await approvalFor(h, expert.key, rejectMe.body.toolCallId as string);
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'reject', actionDigest: approval.actionDigest });
    expect(decided.status).toBe(200);

    const O = bearer(ops);
    const page = await h.t.http.get('/v1/tool-calls').query({ orgId: o.orgId }).set(O);
    expectMatches('get', '/v1/tool-calls', page);
    expect(page.body.items.length).toBeGreaterThanOrEqual(5);
    const first = await h.t.http.get('/v1/tool-calls').query({ orgId: o.orgId, limit: 1 }).set(O);
    expectMatches('get', '/v1/tool-calls', first);
    expect(typeof first.body.nextCursor).toBe('string');

    const stories = [];
    for (const id of [succeeded, waiting, blocked, invalid, rejectMe].map((r) => r.body.toolCallId as string)) {
      const story = await h.t.http.get(`/v1/tool-calls/${id}`).set(O);
      expectMatches('get', '/v1/tool-calls/{id}', story);
      stories.push(story.body as { approval: { decidedAt: string | null } | null; policyDecision: unknown; events: unknown[] });
    }
    // Both sides of each nullable part of the story were checked.
    expect(stories.some((s) => s.approval === null) && stories.some((s) => s.approval !== null)).toBe(true);
    expect(stories.some((s) => s.approval?.decidedAt)).toBe(true);
    expect(stories.some((s) => s.policyDecision === null) && stories.some((s) => s.policyDecision !== null)).toBe(true);

    // The export streams the same ToolCall: each NDJSON line matches the listing's item schema, the CSV header names its fields.
    const itemSchema = (jsonSchema('get', '/v1/tool-calls').properties as Schema).items as Schema;
    const validateItem = validator('ToolCall', itemSchema.items as Schema);
    const ndjson = await h.t.http.get('/v1/tool-calls/export').query({ orgId: o.orgId, format: 'ndjson' }).set(O).buffer(true).parse((res, done) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => done(null, text));
    });
    expect(ndjson.status).toBe(200);
    const exportContent = Object.keys(documented('get', '/v1/tool-calls/export', '200').content ?? {});
    expect(exportContent).toContain(String(ndjson.headers['content-type']).split(';')[0]);
    const lines = (ndjson.body as string).trim().split('\n');
    expect(lines.length).toBe(page.body.items.length);
    for (const line of lines) {
      const ok = validateItem(JSON.parse(line));
      expect(ok ? [] : validateItem.errors, line).toEqual([]);
    }
    const csv = await h.t.http.get('/v1/tool-calls/export').query({ orgId: o.orgId, format: 'csv' }).set(O);
    expect(exportContent).toContain(String(csv.headers['content-type']).split(';')[0]);
    expect(csv.text.split('\r\n')[0].split(',').sort()).toEqual(Object.keys((itemSchema.items as Schema).properties as Schema).sort());
  });

  it('the event ledger, its verification (intact and broken) and usage match their schemas', async () => {
    const O = bearer(ops);
    await h.t.app.get(LedgerSealerService).sealNow(); // sealed events carry chainSeq and hashes
    await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    const events = await h.t.http.get('/v1/ledger/events').query({ orgId: o.orgId, limit: 200 }).set(O);
    expectMatches('get', '/v1/ledger/events', events);
    const items = events.body.items as { chainSeq: number | null; runId: string | null }[];
    expect(items.some((e) => e.chainSeq !== null)).toBe(true);
    expect(items.some((e) => e.runId === null) && items.some((e) => e.runId !== null)).toBe(true);
    const platform = await h.t.http.get('/v1/ledger/events').query({ orgId: NIL_UUID }).set(adminAuth);
    expectMatches('get', '/v1/ledger/events', platform);

    const intact = await h.t.http.get('/v1/ledger/verify').set(O);
    expectMatches('get', '/v1/ledger/verify', intact);
    expect(intact.body.ok).toBe(true);
    const empty = await h.t.http.get('/v1/ledger/verify').query({ orgId: NIL_UUID }).set(adminAuth);
    expectMatches('get', '/v1/ledger/verify', empty);

    // A chain with its first event deleted: {ok: false, brokenAt: {chainSeq: 1, eventId: null, ...}}.
    const org = await createOrg(h.t, 'Broken chain');
    expect((await h.t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: true })).status).toBe(200);
    await h.t.app.get(LedgerSealerService).sealNow();
    const su = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await su.connect();
    try {
      await su.query('BEGIN');
      await su.query('SET LOCAL session_replication_role = replica'); // bypasses the append-only trigger
      await su.query('DELETE FROM runtime_ledger_events WHERE org_id = $1 AND chain_seq = 1', [org]);
      await su.query('COMMIT');
    } finally {
      await su.end();
    }
    const broken = await h.t.http.get('/v1/ledger/verify').query({ orgId: org }).set(adminAuth);
    expectMatches('get', '/v1/ledger/verify', broken);
    expect(broken.body).toMatchObject({ ok: false, brokenAt: { chainSeq: 1, eventId: null } });

    const usage = await h.t.http.get(`/v1/orgs/${o.orgId}/usage`).set(O);
    expectMatches('get', '/v1/orgs/{orgId}/usage', usage);
    expect(usage.body.byTool.length).toBeGreaterThan(0);
  });

  it('orgs, flags, permissions, policies, credentials, run tools and the catalog match their schemas', async () => {
    const org = await createOrg(h.t, 'Schemas');
    expectMatches('get', '/v1/orgs/{orgId}', await h.t.http.get(`/v1/orgs/${org}`).set(adminAuth));

    expectMatches('get', '/v1/orgs/{orgId}/feature-flags', await h.t.http.get(`/v1/orgs/${org}/feature-flags`).set(adminAuth));
    const flag = await h.t.http.put(`/v1/orgs/${org}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: true, reason: 'schemas' });
    expectMatches('put', '/v1/orgs/{orgId}/feature-flags/{flag}', flag);
    expectMatches('get', '/v1/orgs/{orgId}/feature-flags', await h.t.http.get(`/v1/orgs/${org}/feature-flags`).set(adminAuth));

    const items = [
      { toolName: 'order_lookup', action: 'lookup', specialistId: null, enabled: true },
      { toolName: 'order_lookup', action: 'lookup', specialistId: 'support', enabled: false },
    ];
    expectMatches('put', '/v1/orgs/{orgId}/tool-permissions', await h.t.http.put(`/v1/orgs/${org}/tool-permissions`).set(adminAuth).send({ items }));
    expectMatches('get', '/v1/orgs/{orgId}/tool-permissions', await h.t.http.get(`/v1/orgs/${org}/tool-permissions`).set(adminAuth));

    const never = await h.t.http.get(`/v1/orgs/${org}/policies`).set(adminAuth);
    expectMatches('get', '/v1/orgs/{orgId}/policies', never);
    expect(never.body).toEqual({ rules: [], version: 0, updatedAt: null });
    const rules = [
      { id: 'big-refunds', match: { toolName: 'shopify_refund.create', where: [{ path: 'amount', op: 'gt', value: 100 }] }, decision: 'require_expert_approval', riskLevel: 'high', reason: 'refunds over 100' },
      { id: 'notes', match: { toolName: 'shopify_order.*', riskLevel: 'medium', where: [{ path: 'note', op: 'exists' }] }, decision: 'observe' },
      { id: 'rest', decision: 'allow' },
    ];
    expectMatches('put', '/v1/orgs/{orgId}/policies', await h.t.http.put(`/v1/orgs/${org}/policies`).set(adminAuth).send({ rules }));
    expectMatches('get', '/v1/orgs/{orgId}/policies', await h.t.http.get(`/v1/orgs/${org}/policies`).set(adminAuth));

    expectMatches('get', '/v1/orgs/{orgId}/integrations', await h.t.http.get(`/v1/orgs/${org}/integrations`).set(adminAuth)); // none yet
    const creds = await h.t.http.put(`/v1/orgs/${org}/integrations/amazon/credentials`).set(adminAuth).send({ config: CREDENTIALS.amazon });
    expectMatches('put', '/v1/orgs/{orgId}/integrations/{type}/credentials', creds);
    expectMatches('get', '/v1/orgs/{orgId}/integrations', await h.t.http.get(`/v1/orgs/${o.orgId}/integrations`).set(adminAuth));

    for (const format of ['anthropic', 'openai', 'openai-responses']) {
      const tools = await h.t.http.get(`/v1/runs/${o.runId}/tools`).query({ format }).set(bearer(o.agentKey));
      expectMatches('get', '/v1/runs/{runId}/tools', tools);
      expect(tools.body.tools.length).toBeGreaterThan(0);
    }
    expectMatches('get', '/v1/tools', await h.t.http.get('/v1/tools').set(bearer(o.agentKey)));
  });

  it('api keys, orgs and runs match their schemas', async () => {
    const created = await postApiKey(h.t.http, adminAuth, { orgId: o.orgId, role: 'agent', name: 'schemas' });
    expectMatches('post', '/v1/api-keys', created, '201');
    const platform = await postApiKey(h.t.http, adminAuth, { orgId: null, role: 'ops', name: 'schemas platform' });
    expectMatches('post', '/v1/api-keys', platform, '201');
    // One revoked: the listing shows revokedAt set as well as null.
    expect((await h.t.http.delete(`/v1/api-keys/${platform.body.id}`).set(adminAuth)).status).toBe(204);
    expectMatches('get', '/v1/api-keys', await h.t.http.get('/v1/api-keys').query({ orgId: o.orgId }).set(adminAuth));
    const every = await h.t.http.get('/v1/api-keys').query({ limit: 200 }).set(adminAuth);
    expectMatches('get', '/v1/api-keys', every);
    expect((every.body.items as { id: string; revokedAt: string | null }[]).find((k) => k.id === platform.body.id)?.revokedAt).toEqual(expect.any(String));

    expectMatches('post', '/v1/orgs', await h.t.http.post('/v1/orgs').set(adminAuth).send({ name: 'Schemas org' }), '201');

    const A = bearer(o.agentKey);
    for (const end of ['complete', 'cancel']) {
      const run = await h.t.http.post('/v1/runs').set(A).send({ specialistId: 'support', conversationId: 'c-1', metadata: { channel: 'chat' } });
      expectMatches('post', '/v1/runs', run, '201');
      expectMatches('get', '/v1/runs/{runId}', await h.t.http.get(`/v1/runs/${run.body.id}`).set(A));
      const ended = await h.t.http.post(`/v1/runs/${run.body.id}/${end}`).set(A).send({ reason: 'done' });
      expectMatches('post', `/v1/runs/{runId}/${end}`, ended);
      expect(ended.body.ended).not.toBeNull();
      expectMatches('get', '/v1/runs/{runId}', await h.t.http.get(`/v1/runs/${run.body.id}`).set(A));
    }
  });

  it('tool calls: each status the pipeline answers with the tool-call body, a replay, the result route and a batch match it', async () => {
    const A = bearer(o.agentKey);
    const path = '/v1/runs/{runId}/tool-calls';
    const call = (body: object) => h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(A).send(body);
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const ok = await call(use);
    expectMatches('post', path, ok);
    const replay = await call(use);
    expectMatches('post', path, replay);
    expect([replay.body.replayed, replay.headers['idempotent-replayed']]).toEqual([true, 'true']);
    expectMatches('post', path, await call(refundUse('5.00')), '202');
    expectMatches('post', path, await call(toolUse('shopify_order', { action: 'add_note', orderId: '1', note: 'x' })), '403');
    expectMatches('post', path, await call(toolUse('order_lookup', { action: 'lookup' })), '422');
    expectMatches('get', '/v1/tool-calls/{id}/result', await h.t.http.get(`/v1/tool-calls/${ok.body.toolCallId}/result`).set(A));

    // Every item kind of a batch: a tool-call body, and problem+json (VALIDATION_FAILED) for one that is not a tool_use.
    const batch = await h.t.http
      .post(`/v1/runs/${o.runId}/tool-calls:batch`)
      .set(A)
      .send({ toolUses: [toolUse('order_lookup', { action: 'lookup', orderId: '12345' }), refundUse('6.00'), { type: 'tool_use', id: 'toolu_bad' }] });
    expectMatches('post', '/v1/runs/{runId}/tool-calls:batch', batch);
    expect((batch.body.results as { code?: string }[]).some((r) => r.code !== undefined)).toBe(true);
  });

  it('approvals: the listing, one approval and each decision match the approval schema', async () => {
    const expert = (await createKey(h.t, o.orgId, 'expert')).key;
    const E = bearer(expert);
    const decided = [];
    for (const decision of ['approve', 'reject', null]) {
      const waiting = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(refundUse('7.00'));
      expect(waiting.status).toBe(202);
      const a = await approvalFor(h, expert, waiting.body.toolCallId as string);
      expectMatches('get', '/v1/approvals/{id}', await h.t.http.get(`/v1/approvals/${a.id}`).set(E));
      if (decision === null) continue; // left pending
      const res = await h.t.http.post(`/v1/approvals/${a.id}/decision`).set(E).send({ decision, actionDigest: a.actionDigest, reason: 'schemas' });
      expectMatches('post', '/v1/approvals/{id}/decision', res);
      decided.push(res.body.status);
    }
    expect(decided).toEqual(['approved', 'rejected']);
    const all = await h.t.http.get('/v1/approvals').set(E);
    expectMatches('get', '/v1/approvals', all);
    const statuses = new Set((all.body.items as { status: string }[]).map((a) => a.status));
    expect(['pending', 'approved', 'rejected'].every((s) => statuses.has(s))).toBe(true);
    const first = await h.t.http.get('/v1/approvals').query({ limit: 1 }).set(E);
    expectMatches('get', '/v1/approvals', first);
    expect(typeof first.body.nextCursor).toBe('string');
  });

  it('reconcile answers {id, status, note} as documented', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    h.emu.fault({ vendor: 'shopify', kind: 'reset_after' });
    const lost = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('shopify_order', { action: 'add_note', orderId: '12345', note: 'n' }));
    expect(lost.body).toMatchObject({ status: 'indeterminate', errorCode: 'OUTCOME_UNKNOWN' });
    const orgOps = (await createKey(h.t, org.orgId, 'ops')).key;
    const rec = await h.t.http.post(`/v1/tool-calls/${lost.body.toolCallId}/reconcile`).set(bearer(orgOps)).send({ status: 'succeeded', note: 'checked at Shopify' });
    expectMatches('post', '/v1/tool-calls/{id}/reconcile', rec);
  });

  it('problem+json answers carry only what the Problem schema documents: errors, retryAfterSeconds, toolCallId, outcomeConfirmed', async () => {
    expectProblem(await h.t.http.post('/v1/orgs').set(adminAuth).send({ name: 'x', foo: 1 }), 'VALIDATION_FAILED');
    expectProblem(await h.t.http.get(`/v1/approvals/${NIL_UUID}`).set(adminAuth), 'NOT_FOUND');

    // A call that ran whose outcome cannot be written for longer than the request waits: 503 naming the call.
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (text.includes('tc AS (UPDATE tool_calls SET status = $2')) throw connectionLost();
      return send();
    });
    let unavailable;
    try {
      unavailable = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    } finally {
      undo();
    }
    expectProblem(unavailable, 'DATABASE_UNAVAILABLE');
    expect(unavailable.body).toMatchObject({ outcomeConfirmed: false, toolCallId: expect.any(String), retryAfterSeconds: 1 });
  }, 20_000);
});
