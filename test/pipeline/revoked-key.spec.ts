import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emulatorEnv, setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { keyIdOfRole, postApiKey } from '../support/api-keys.js';
import { adminAuth, bearer, createKey, startTestApp, type TestApp } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

const addNote = (orderId: string, note: string) => toolUse('shopify_order', { action: 'add_note', orderId, note });
const lookup = () => toolUse('order_lookup', { action: 'lookup', orderId: '12345' });

/**
 * A revoked API key starts nothing new, on any replica, from the moment the revocation commits: the
 * intent statement reads the key (a request authenticated before the revocation, a long batch, or
 * another replica still holding the key in its 5 s cache would otherwise go on).
 */
describe('a revoked API key', () => {
  let h: Harness;
  let replica: TestApp;
  beforeAll(async () => {
    h = await startHarness({ VENDOR_TIMEOUT_MS: '5000' });
    replica = await startTestApp({ ...emulatorEnv(h.emu.url), VENDOR_TIMEOUT_MS: '5000' });
  });
  afterAll(async () => {
    await replica?.close();
    await h?.close();
  });

  const agentKeyId = (orgId: string): Promise<string> => keyIdOfRole(h.t.http, adminAuth, orgId, 'agent');

  it('a batch running when its key is revoked starts no further write: the items after answer 401, nothing recorded for them', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['shopify_order.add_note'] });
    const uses = Array.from({ length: 6 }, (_, i) => addNote('450789469', `revoke-race note ${i}`));
    // Each write is held 2.5 s at the vendor (well under the 5 s vendor timeout): time for the revocation to commit
    // while the first one is there, even on a loaded machine.
    h.emu.fault({ vendor: 'shopify', kind: 'delay', delayMs: 2_500, bodyMatch: /revoke-race note/, times: Infinity });
    const from = h.emu.requests.length;
    const noteRequests = () => h.emu.requests.slice(from).filter((r) => /revoke-race note/.test(r.body));
    const notes = () => noteRequests().length;
    const batch = h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(agentKey)).send({ toolUses: uses }).then((r) => r);
    await waitFor(() => notes() === 1, 'the first write to be at the vendor');
    expect((await h.t.http.delete(`/v1/api-keys/${await agentKeyId(orgId)}`).set(adminAuth)).status).toBe(204);
    const atRevoke = notes();
    // The revocation committed while the first write was still held: the items after it start after the revocation.
    expect(noteRequests()[0].finishedAt, 'the first write is still at the vendor when the key is revoked').toBeUndefined();
    const res = await batch;
    h.emu.clearFaults();

    expect(atRevoke).toBe(1);
    expect(notes()).toBe(1); // the write already at the vendor finished; nothing after it left
    expect(res.status).toBe(200);
    expect(res.body.results).toHaveLength(6);
    expect(res.body.results[0]).toMatchObject({ status: 'succeeded' });
    for (const item of res.body.results.slice(1)) expect(item).toMatchObject({ status: 401, code: 'UNAUTHENTICATED' });
    const rows = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1', [runId])) as [{ n: number }];
    expect(rows[0].n).toBe(1);
  }, 30_000);

  it('another replica that still has the key cached (5 s) refuses new calls with it at once, and records nothing', async () => {
    const { orgId, agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    expect((await replica.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(lookup())).body.status).toBe('succeeded'); // cached there
    expect((await h.t.http.delete(`/v1/api-keys/${await agentKeyId(orgId)}`).set(adminAuth)).status).toBe(204);
    const late = await replica.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(lookup());
    expect([late.status, late.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    const rows = (await h.t.ds.query('SELECT count(*)::int AS n FROM tool_calls WHERE run_id = $1', [runId])) as [{ n: number }];
    expect(rows[0].n).toBe(1);
  });

  it('another replica that still has a revoked admin key cached refuses every write with it (keys, flags, credentials, runs), while reads may still pass', async () => {
    const { orgId, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const admin = await createKey(h.t, orgId, 'admin');
    // Cached on the replica by a read.
    expect((await replica.http.get(`/v1/orgs/${orgId}/feature-flags`).set(bearer(admin.key))).status).toBe(200);
    expect((await h.t.http.delete(`/v1/api-keys/${admin.id}`).set(adminAuth)).status).toBe(204);
    const writes = [
      postApiKey(replica.http, bearer(admin.key), { orgId, role: 'admin', name: 'persistence' }),
      replica.http.put(`/v1/orgs/${orgId}/feature-flags/tool_calling_enabled`).set(bearer(admin.key)).send({ enabled: false }),
      replica.http.delete(`/v1/orgs/${orgId}/integrations/shopify/credentials`).set(bearer(admin.key)),
      replica.http.post(`/v1/runs/${runId}/cancel`).set(bearer(admin.key)).send({}),
    ];
    for (const res of await Promise.all(writes)) expect([res.status, res.body.code]).toEqual([401, 'UNAUTHENTICATED']);
    const keys = (await h.t.ds.query(`SELECT count(*)::int AS n FROM api_keys WHERE name = 'persistence'`)) as [{ n: number }];
    expect(keys[0].n).toBe(0);
    expect((await h.t.http.get(`/v1/orgs/${orgId}/feature-flags`).set(adminAuth)).body).toMatchObject({ tool_calling_enabled: true });
    expect((await h.t.http.get(`/v1/runs/${runId}`).set(adminAuth)).body.status).toBe('running');
    // A live key's writes on the replica are looked up afresh and go through.
    const live = await createKey(h.t, orgId, 'admin');
    expect((await replica.http.put(`/v1/orgs/${orgId}/feature-flags/tool_calling_enabled`).set(bearer(live.key)).send({ enabled: true })).status).toBe(200);
  });
});
