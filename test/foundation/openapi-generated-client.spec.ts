/**
 * What a client generated from /openapi.json with openapi-typescript (defaults) reads in the document.
 *
 * F1. A free-form object documented as bare `{type: object}` (no properties, no additionalProperties) is generated as
 *     `Record<string, never>` by openapi-typescript 7 (its documented default; `--empty-objects-unknown` opts out):
 *     CreateRunDto.metadata then cannot be sent with any field (`{metadata: {channel: 'chat'}}` is TS2322), and the
 *     run's metadata, every inputRedacted, event metadata, the catalog's inputSchema and the run tools' input_schema /
 *     parameters `properties` read as always-empty. `additionalProperties: true` says "any fields" to every generator.
 * F2. Fields the gateway always sends are documented optional: toolResult.{type, tool_use_id, content, is_error} and
 *     manifest.allowedTools. The generated toolResult (`type?: 'tool_result'`, `tool_use_id?: string`) is then not
 *     assignable to Anthropic's ToolResultBlockParam, though the document says "hand this to the model as-is".
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refundUse } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

type Schema = Record<string, unknown>;
interface Doc { paths: Record<string, Record<string, { requestBody?: unknown; responses: Record<string, { content?: Record<string, { schema?: Schema }> }> }>>; components: { schemas: Record<string, Schema> } }

/** JSON pointers of every `{type: object}` that lists no properties and says nothing of additional ones. */
function bareObjects(node: unknown, at: string, out: string[]): string[] {
  if (Array.isArray(node)) node.forEach((x, i) => bareObjects(x, `${at}/${i}`, out));
  else if (node !== null && typeof node === 'object') {
    const s = node as Schema;
    if (s.type === 'object' && s.properties === undefined && s.additionalProperties === undefined && !s.oneOf && !s.anyOf && !s.allOf) out.push(at);
    for (const [k, v] of Object.entries(s)) if (k !== 'enum' && k !== 'example' && k !== 'default') bareObjects(v, `${at}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`, out);
  }
  return out;
}

const at = (schema: unknown, ...path: string[]): Schema => path.reduce((s, k) => (s as Schema)[k], schema) as Schema;

describe('OpenAPI shapes as a generated typed client reads them', () => {
  let h: Harness;
  let o: OrgSetup;
  let doc: Doc;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
    o = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_refund.create'] });
    doc = (await h.t.http.get('/openapi.json')).body as Doc;
  });
  afterAll(async () => {
    await h?.close();
  });

  it('free-form objects say additionalProperties (openapi-typescript types a bare {type: object} as Record<string, never>)', async () => {
    // The gateway takes and answers fields there: a run's metadata, a call's redacted input.
    const run = await h.t.http.post('/v1/runs').set(bearer(o.agentKey)).send({ specialistId: 'support', metadata: { channel: 'chat' } });
    expect([run.status, run.body.metadata]).toEqual([201, { channel: 'chat' }]);
    const waiting = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(refundUse('1.00'));
    expect(waiting.status).toBe(202);
    const approvals = await h.t.http.get('/v1/approvals').set(bearer(o.adminKey));
    expect(Object.keys(approvals.body.items[0].inputRedacted).length).toBeGreaterThan(0);

    const bare = [...bareObjects(doc.paths, '#/paths', []), ...bareObjects(doc.components, '#/components', [])];
    expect(bare, 'free-form objects a generated client reads as "no fields allowed"').toEqual([]);
  }, 30_000);

  it('fields sent on every answer are required: toolResult.type/tool_use_id/content/is_error, manifest.allowedTools', async () => {
    const call = await h.t.http.post(`/v1/runs/${o.runId}/tool-calls`).set(bearer(o.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(call.status).toBe(200);
    expect(Object.keys(call.body.toolResult).sort()).toEqual(['content', 'is_error', 'tool_use_id', 'type']);
    const run = await h.t.http.get(`/v1/runs/${o.runId}`).set(bearer(o.agentKey));
    expect(Array.isArray(run.body.manifest.allowedTools)).toBe(true);

    const json = (method: string, path: string, status: string) => doc.paths[path][method].responses[status].content!['application/json'].schema!;
    const missing: string[] = [];
    const need = (where: string, schema: Schema, fields: string[]) => {
      for (const f of fields) if (!((schema.required as string[] | undefined) ?? []).includes(f)) missing.push(`${where}.${f}`);
    };
    for (const [m, p, s] of [['post', '/v1/runs/{runId}/tool-calls', '200'], ['post', '/v1/runs/{runId}/tool-calls', '202'], ['get', '/v1/tool-calls/{id}/result', '200']]) {
      need(`${m.toUpperCase()} ${p} ${s} toolResult`, at(json(m, p, s), 'properties', 'toolResult'), ['type', 'tool_use_id', 'content', 'is_error']);
    }
    for (const [m, p, s] of [['post', '/v1/runs', '201'], ['get', '/v1/runs/{runId}', '200']]) {
      need(`${m.toUpperCase()} ${p} ${s} manifest`, at(json(m, p, s), 'properties', 'manifest'), ['allowedTools']);
    }
    expect(missing, 'always-sent fields documented optional (generated as `field?:`)').toEqual([]);
  }, 30_000);
});
