import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ToolCallsService } from '../../src/tool-calls/tool-calls.service.js';
import { emulatorEnv, setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { keyIdOfRole } from '../support/api-keys.js';
import { adminAuth, bearer, startTestApp, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

const lookup = (orderId = '12345') => toolUse('order_lookup', { action: 'lookup', orderId });

/**
 * A tool-call post skips the fresh key lookup because its intent statement re-checks the key. Two answers never
 * reach that statement: the replay for a run that has ended, and the refusal when the org × vendor slot is full.
 * On a replica that still has a revoked key cached (5 s), both answer 401 and record nothing with it.
 */
describe('a revoked API key on the paths that do not reach the intent statement', () => {
  let h: Harness;
  let replica: TestApp;
  beforeAll(async () => {
    h = await startHarness();
    replica = await startTestApp({ ...emulatorEnv(h.emu.url), VENDOR_CONCURRENCY_LIMIT: '1', VENDOR_TIMEOUT_MS: '8000' });
  });
  afterAll(async () => {
    await replica?.close();
    await h?.close();
  });

  const agentKeyId = (orgId: string): Promise<string> => keyIdOfRole(h.t.http, adminAuth, orgId, 'agent');

  it('a run that ended: a resend of a stored call is 401, not its replay with the result', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const use = lookup();
    expect((await replica.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(use)).body.status).toBe('succeeded'); // key cached there
    expect((await replica.http.post(`/v1/runs/${runId}/complete`).set(bearer(agentKey)).send({})).status).toBe(200);
    // The live key still gets its replay from the ended run.
    const replay = await replica.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(use);
    expect([replay.status, replay.body.replayed]).toEqual([200, true]);
    expect((await h.t.http.delete(`/v1/api-keys/${await agentKeyId(orgId)}`).set(adminAuth)).status).toBe(204);
    const late = await replica.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(use);
    expect([late.status, late.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    expect(late.text).not.toContain('"result"');
  });

  it('a batch item answered by replay only (the gateway stopping, or held behind an earlier item): 401 for a revoked key', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const use = lookup();
    expect((await replica.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(use)).body.status).toBe('succeeded');
    const keyId = await agentKeyId(orgId);
    const principal = { keyId, orgId, role: 'agent' as const };
    const calls = replica.app.get(ToolCallsService);
    expect((await calls.replayOnly(principal, runId, use)).body).toMatchObject({ status: 'succeeded', replayed: true });
    expect((await h.t.http.delete(`/v1/api-keys/${keyId}`).set(adminAuth)).status).toBe(204);
    await expect(calls.replayOnly(principal, runId, use)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
  });

  it('a full vendor slot: a new call is 401 with no tool_call.rejected event naming the revoked key', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const keyId = await agentKeyId(orgId);
    // The replica's only Shopify slot is held by a lookup the emulator keeps 3 s.
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 3_000, bodyMatch: /450789469/, times: 1 });
    const from = h.emu.requests.length;
    const held = replica.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(lookup('450789469')).then((r) => r);
    await waitFor(() => h.emu.requests.slice(from).some((r) => r.body.includes('450789469')), 'the held lookup to be at the vendor');
    // While the key is live, the slot's refusal is 429 CONCURRENCY_LIMIT (what the path answers).
    const busy = await replica.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(lookup('12345'));
    expect([busy.status, busy.body.code]).toEqual([429, 'CONCURRENCY_LIMIT']);
    expect((await h.t.http.delete(`/v1/api-keys/${keyId}`).set(adminAuth)).status).toBe(204);
    const events = async () =>
      ((await h.t.ds.query(`SELECT count(*)::int AS n FROM runtime_ledger_events WHERE run_id = $1 AND type = 'tool_call.rejected'`, [runId])) as [{ n: number }])[0].n;
    const before = await events();
    const late = await replica.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(lookup('12346'));
    expect([late.status, late.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    expect(await events()).toBe(before);
    expect((await held).body.status).toBe('succeeded');
    h.emu.clearFaults();
  });
});
