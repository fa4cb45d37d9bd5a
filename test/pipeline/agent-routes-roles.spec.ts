import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';

const lookup = (orderId = '12345') => toolUse('order_lookup', { action: 'lookup', orderId });

/**
 * API.md §1: an admin may do "everything above", so also what an agent does (create runs, post tool calls,
 * read results) — in its own org. The full (unredacted) result is the agent's (and admin's): ops read the
 * redacted ledger, so GET /v1/tool-calls/:id/result answers them 403.
 */
describe('agent routes: which roles may call them', () => {
  let h: Harness;
  let a: OrgSetup;
  let b: OrgSetup;
  let callId: string;
  beforeAll(async () => {
    h = await startHarness();
    a = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    b = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const res = await h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(bearer(a.agentKey)).send(lookup());
    expect(res.status).toBe(200);
    callId = res.body.toolCallId as string;
  });
  afterAll(async () => {
    await h?.close();
  });

  const result = (key: string) => h.t.http.get(`/v1/tool-calls/${callId}/result`).set(bearer(key));

  it('GET …/result: agent and admin get the full result; ops (org or platform) and experts 403; another org 404', async () => {
    const byAgent = await result(a.agentKey);
    expect(byAgent.status).toBe(200);
    const email = (byAgent.body.result as { customer: { email: string } }).customer.email;
    expect(email).toContain('@');
    const byAdmin = await result(a.adminKey);
    expect(byAdmin.status).toBe(200);
    expect(byAdmin.body.result).toEqual(byAgent.body.result);

    for (const key of [(await createKey(h.t, a.orgId, 'ops')).key, (await createKey(h.t, null, 'ops')).key, (await createKey(h.t, a.orgId, 'expert')).key]) {
      const res = await result(key);
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('FORBIDDEN');
      expect(JSON.stringify(res.body)).not.toContain(email);
    }
    // A wrong role learns nothing about existence: the same 403 for a random id.
    const opsKey = (await createKey(h.t, a.orgId, 'ops')).key;
    expect((await h.t.http.get(`/v1/tool-calls/${randomUUID()}/result`).set(bearer(opsKey))).status).toBe(403);

    const crossAdmin = await result(b.adminKey);
    expect(crossAdmin.status).toBe(404);
    expect((await result(b.agentKey)).status).toBe(404);
  });

  it('answers with Cache-Control: no-store — a full result, a listing, an error — so no cache keeps them', async () => {
    for (const res of [
      await result(a.agentKey),
      await h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(bearer(a.agentKey)).send(lookup('1001')),
      await h.t.http.get('/v1/tool-calls').set(bearer(a.adminKey)),
      await h.t.http.get(`/v1/tool-calls/${randomUUID()}/result`).set(bearer(a.agentKey)),
      await h.t.http.get(`/V1/Tool-Calls/${callId}/result`).set(bearer(a.agentKey)),
    ]) {
      expect(res.status).toBeLessThan(500);
      expect(res.headers['cache-control'], `${res.status} ${res.text.slice(0, 100)}`).toBe('no-store');
    }
  });

  it('POST /v1/runs: an org admin creates a run in its own org; a platform admin (no org) gets 403 saying why', async () => {
    const run = await h.t.http.post('/v1/runs').set(bearer(a.adminKey)).send({ specialistId: 'support' });
    expect(run.status).toBe(201);
    expect(run.body).toMatchObject({ orgId: a.orgId, status: 'running', manifest: { allowedTools: ['order_lookup.lookup'] } });
    // The admin's run works like an agent's, for the admin and for the org's agent; other orgs do not see it.
    const byAdmin = await h.t.http.post(`/v1/runs/${run.body.id}/tool-calls`).set(bearer(a.adminKey)).send(lookup());
    expect(byAdmin.status).toBe(200);
    expect(byAdmin.body).toMatchObject({ status: 'succeeded', result: { orderId: '12345' } });
    expect((await h.t.http.get(`/v1/runs/${run.body.id}/tools`).set(bearer(a.adminKey))).status).toBe(200);
    const foreign = await h.t.http.post(`/v1/runs/${run.body.id}/tool-calls`).set(bearer(b.adminKey)).send(lookup());
    expect(foreign.status).toBe(404);
    expect(foreign.body.code).toBe('RUN_NOT_FOUND');

    const platform = await h.t.http.post('/v1/runs').set(adminAuth).send({ specialistId: 'support' });
    expect(platform.status).toBe(403);
    expect(platform.headers['content-type']).toMatch(/application\/problem\+json/);
    expect(platform.body).toMatchObject({ code: 'FORBIDDEN' });
    expect(platform.body.detail).toMatch(/platform key/);
    for (const role of ['ops', 'expert'] as const) {
      expect((await h.t.http.post('/v1/runs').set(bearer((await createKey(h.t, a.orgId, role)).key)).send({ specialistId: 'support' })).status).toBe(403);
    }

    const doc = await h.t.http.get('/openapi.json');
    expect(doc.body.paths['/v1/runs'].post.description).toMatch(/platform key/);
    expect(doc.body.paths['/v1/runs/{runId}/tool-calls'].post.description).toMatch(/platform key/);
    expect(doc.body.paths['/v1/tool-calls/{id}/result'].get.description).toMatch(/An ops key gets 403/);
  });

  it('POST …/tool-calls: an org admin posts into its org’s runs; another org’s admin gets 404; a platform admin 403', async () => {
    const own = await h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(bearer(a.adminKey)).send(lookup('1001'));
    expect(own.status).toBe(200);
    expect(own.body).toMatchObject({ status: 'succeeded', result: { orderId: '1001' } });
    // The org's agent reads the call the admin made (same org).
    expect((await h.t.http.get(`/v1/tool-calls/${own.body.toolCallId}/result`).set(bearer(a.agentKey))).status).toBe(200);

    const use = lookup(); // one tool_use for both: the answers name its id (toolResult)
    const cross = await h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(bearer(b.adminKey)).send(use);
    const random = await h.t.http.post(`/v1/runs/${randomUUID()}/tool-calls`).set(bearer(b.adminKey)).send(use);
    expect(cross.status).toBe(404);
    expect(cross.body.code).toBe('RUN_NOT_FOUND');
    expect({ ...cross.body, correlationId: 0 }).toEqual({ ...random.body, correlationId: 0 });
    const [{ n }] = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE org_id = $1', [b.orgId])) as [{ n: number }];
    expect(n).toBe(0);

    const platform = await h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(adminAuth).send(lookup());
    expect(platform.status).toBe(403);
    expect(platform.body).toMatchObject({ code: 'FORBIDDEN' });
    expect(platform.body.detail).toMatch(/platform key/);
    expect((await h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(bearer((await createKey(h.t, a.orgId, 'ops')).key)).send(lookup())).status).toBe(403);
  });
});

/**
 * Express routes paths case-insensitively, so /V1/Runs/…/Tool-Calls reaches the tool-call handler: the
 * body reader must treat it as the tool-call route too (512 KiB limit, NUL repaired into a recorded 422),
 * never as an admin route (64 KiB, NUL refused 400) that happens to run the pipeline.
 */
describe('tool-call routes spelled in another case', () => {
  let h: Harness;
  let o: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    o = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('get the tool-call body limit and NUL repair, as the lower-case path does', async () => {
    for (const path of [`/v1/runs/${o.runId}/tool-calls`, `/V1/Runs/${o.runId}/Tool-Calls`, `/V1/RUNS/${o.runId.toUpperCase()}/TOOL-CALLS`]) {
      const big = toolUse('order_lookup', { action: 'lookup', orderId: '12345', pad: 'x'.repeat(100 * 1024) });
      const res = await h.t.http.post(path).set(bearer(o.agentKey)).send(big);
      expect([res.status, res.body.errorCode], `${path}: ${res.text.slice(0, 200)}`).toEqual([422, 'INVALID_INPUT']); // pad is not a param
      const nul = await h.t.http.post(path).set(bearer(o.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12\u00003' }));
      expect([nul.status, nul.body.errorCode], `${path}: ${nul.text.slice(0, 200)}`).toEqual([422, 'INVALID_INPUT']);
    }
    const batch = await h.t.http
      .post(`/V1/Runs/${o.runId}/Tool-Calls:Batch`)
      .set(bearer(o.agentKey))
      .send({ toolUses: [toolUse('order_lookup', { action: 'lookup', orderId: '12345', pad: 'x'.repeat(100 * 1024) })] });
    expect(batch.status, batch.text.slice(0, 200)).toBe(200);
  });
});
