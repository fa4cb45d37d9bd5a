import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emulatorEnv, setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { keyIdOfRole } from '../support/api-keys.js';
import { adminAuth, bearer, startTestApp, type TestApp } from '../support/test-app.js';

const lookup = () => toolUse('order_lookup', { action: 'lookup', orderId: '12345' });

/**
 * README "Operating it": a revoked key "starts no tool call anywhere once revoked ... and makes no admin change:
 * write routes look the key up afresh ... is refused `401`". The single tool-call route answers 401 on a replica that
 * still caches the key; a batch from the same key on the same replica should not answer 200 as if it had been
 * accepted (a runtime then hands the model one "a valid API key is required" tool_result per tool_use).
 */
describe('a batch sent with a key revoked before any item ran', () => {
  let h: Harness;
  let replica: TestApp;
  beforeAll(async () => {
    h = await startHarness();
    replica = await startTestApp({ ...emulatorEnv(h.emu.url) });
  });
  afterAll(async () => {
    await replica?.close();
    await h?.close();
  });

  it('answers 401 for the whole batch, as the single route does (test/pipeline/revoked-key.spec.ts), not 200 with a 401 per item', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const batch = (toolUses: unknown[]) => replica.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(agentKey)).send({ toolUses });
    expect((await batch([lookup()])).body.results[0].status).toBe('succeeded'); // the key is now cached on the replica
    const keyId = await keyIdOfRole(h.t.http, adminAuth, orgId, 'agent');
    expect((await h.t.http.delete(`/v1/api-keys/${keyId}`).set(adminAuth)).status).toBe(204);

    const res = await batch([lookup(), lookup()]);
    // Not 200 {"results": [{status: 401, code: UNAUTHENTICATED}, {status: 401, ...}]}.
    const rows = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1', [runId])) as [{ n: number }];
    expect(rows[0].n).toBe(1); // nothing recorded either way
    expect([res.status, res.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.headers['www-authenticate']).toBeDefined();
  });
});
