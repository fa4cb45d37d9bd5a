import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emulatorEnv, setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey, startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Found by a model-based run of the call lifecycle with two replicas. API.md: a revoked key → 401, and the checks go
 * authenticate (401) → role (403) → scope (404). A tool-call POST is let in on the replica's cached copy of its key
 * (its own statement re-reads the key); but a request refused before that statement — a run of another key of its org
 * (404 RUN_NOT_FOUND), a body that is no tool_use (400) — was answered as if the key were live, on replica B, after
 * the key's revocation through A had been answered 204. Now such a refusal first checks the key: 401.
 */
describe('a revoked agent key on another replica', () => {
  let h: Harness;
  let b: TestApp;
  beforeAll(async () => {
    h = await startHarness();
    b = await startTestApp({ ...emulatorEnv(h.emu.url), VENDOR_TIMEOUT_MS: '2000', VENDOR_CONNECT_TIMEOUT_MS: '500' });
  });
  afterAll(async () => {
    await b?.close();
    await h?.close();
  });

  it.each([false, true])('posting a tool call answers 401 whatever run it names (the runs ended: %s)', async (ended) => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const second = await createKey(h.t, org.orgId, 'agent');
    const own = await b.http.post('/v1/runs').set(bearer(second.key)).send({ specialistId: 'support' }); // B caches the key
    expect(own.status).toBe(201);
    if (ended) {
      expect((await h.t.http.post(`/v1/runs/${org.runId}/complete`).set(bearer(org.agentKey)).send({})).status).toBe(200);
      expect((await h.t.http.post(`/v1/runs/${own.body.id}/complete`).set(bearer(second.key)).send({})).status).toBe(200);
    }
    expect((await h.t.http.delete(`/v1/api-keys/${second.id}`).set(adminAuth)).status).toBe(204);
    const lookup = () => toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    // the other key's run first (sent to its own run first, the key's fresh read there refuses it and B forgets it)
    const onOther = await b.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(second.key)).send(lookup());
    const onOwn = await b.http.post(`/v1/runs/${own.body.id}/tool-calls`).set(bearer(second.key)).send(lookup());
    expect({ ownRun: [onOwn.status, onOwn.body.code], otherKeysRun: [onOther.status, onOther.body.code] }).toEqual({
      ownRun: [401, 'UNAUTHENTICATED'],
      otherKeysRun: [401, 'UNAUTHENTICATED'],
    });
  });

  it('a batch to another key\'s run, and a body that is no tool_use, answer 401 too; a live key still gets its 404 and 400', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const second = await createKey(h.t, org.orgId, 'agent');
    const own = await b.http.post('/v1/runs').set(bearer(second.key)).send({ specialistId: 'support' }); // B caches the key
    expect(own.status).toBe(201);
    const lookup = () => toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const refusals = async () => {
      const batch = await b.http.post(`/v1/runs/${org.runId}/tool-calls:batch`).set(bearer(second.key)).send({ toolUses: [lookup()] });
      const badBody = await b.http.post(`/v1/runs/${own.body.id}/tool-calls`).set(bearer(second.key)).send({ type: 'not_a_tool_use' });
      return { batch: [batch.status, batch.body.code], badBody: [badBody.status, badBody.body.code] };
    };
    expect(await refusals()).toEqual({ batch: [404, 'RUN_NOT_FOUND'], badBody: [400, 'BAD_REQUEST'] });
    expect((await h.t.http.delete(`/v1/api-keys/${second.id}`).set(adminAuth)).status).toBe(204);
    expect(await refusals()).toEqual({ batch: [401, 'UNAUTHENTICATED'], badBody: [401, 'UNAUTHENTICATED'] });
  });
});
