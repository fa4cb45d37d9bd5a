import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * agent_runs.metadata is jsonb the gateway writes ({runtimeManifest: {allowedTools}, user?, ended?}). A row of another
 * shape (an operator's edit, a restore) answered 500 INTERNAL on every read and call of the run; it now fails closed:
 * a manifest that is not a list of strings allows nothing, and the run reads as such.
 */
describe('a run row whose metadata is not the shape the gateway writes', () => {
  let h: Harness;
  let a: OrgSetup;
  const newRun = async (): Promise<string> => {
    const res = await h.t.http.post('/v1/runs').set(bearer(a.agentKey)).send({ specialistId: 'support' });
    expect(res.status).toBe(201);
    return (res.body as { id: string }).id;
  };

  beforeAll(async () => {
    h = await startHarness();
    a = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('no runtimeManifest: the run reads with an empty manifest, its tool list is empty, and a call is blocked NOT_IN_MANIFEST', async () => {
    const runId = await newRun();
    await h.t.ds.query(`UPDATE agent_runs SET metadata = '{"user": {"ticket": 1}}'::jsonb WHERE id = $1`, [runId]);
    const got = await h.t.http.get(`/v1/runs/${runId}`).set(bearer(a.agentKey));
    expect(got.status, JSON.stringify(got.body)).toBe(200);
    expect(got.body).toMatchObject({ id: runId, manifest: { allowedTools: [] }, metadata: { ticket: 1 } });
    const tools = await h.t.http.get(`/v1/runs/${runId}/tools`).set(bearer(a.agentKey));
    expect(tools.status, JSON.stringify(tools.body)).toBe(200);
    expect(tools.body.tools).toEqual([]);
    const sent = h.emu.requests.length;
    const call = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(a.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(call.body, JSON.stringify(call.body)).toMatchObject({ status: 'blocked', errorCode: 'NOT_IN_MANIFEST' });
    expect(h.emu.requests.length).toBe(sent); // nothing reached the vendor
  });

  it('allowedTools stored as one string, an ended time that is no date: no 500, and the string allows nothing', async () => {
    const runId = await newRun();
    await h.t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{runtimeManifest,allowedTools}', '"order_lookup.lookup"') WHERE id = $1`, [runId]);
    const tools = await h.t.http.get(`/v1/runs/${runId}/tools`).set(bearer(a.agentKey));
    expect(tools.status, JSON.stringify(tools.body)).toBe(200);
    expect(tools.body.tools).toEqual([]);
    const call = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(a.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(call.body).toMatchObject({ status: 'blocked', errorCode: 'NOT_IN_MANIFEST' });
    expect((await h.t.http.post(`/v1/runs/${runId}/complete`).set(bearer(a.agentKey))).status).toBe(200);
    await h.t.ds.query(`UPDATE agent_runs SET metadata = jsonb_set(metadata, '{ended}', '{"at": "yesterday", "reason": 7}') WHERE id = $1`, [runId]);
    const ended = await h.t.http.get(`/v1/runs/${runId}`).set(bearer(a.agentKey));
    expect(ended.status, JSON.stringify(ended.body)).toBe(200);
    expect(ended.body.ended).toEqual({ at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/), reason: null });
  });
});
