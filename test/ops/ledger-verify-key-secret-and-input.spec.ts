import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, verifyLedger, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey, createOrg } from '../support/test-app.js';

/**
 * Two rows verify held to nothing, rewritten with the gateway's own database role (no trigger to get past): an API
 * key's stored hash, swapped for the hash of a key made up (its holder is then that org's admin, every act recorded as
 * the real key's), and a call's recorded input (what ops read the call did). The api_key.created event now records
 * the hash by digest (keyHashDigest), the tool_call.requested event the input (inputDigest), and verify compares them.
 * Found by a review of the ledger against someone with SQL access.
 */
describe('verify: a key given another secret, a call given another input', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const forgedKey = () => `tgw_${randomBytes(32).toString('base64url')}`;
  const sha256 = (text: string) => createHash('sha256').update(text).digest();

  it("an org key whose hash was swapped: the made-up key works, and verify names the key's creation", async () => {
    const orgId = await createOrg(h.t, 'Key Swap Co');
    const admin = await createKey(h.t, orgId, 'admin');
    await createKey(h.t, orgId, 'ops'); // another key of the org, untouched
    expect(await verifyLedger(h.t, orgId)).toMatchObject({ ok: true });

    const forged = forgedKey();
    await h.t.ds.query('UPDATE api_keys SET key_hash = $2 WHERE id = $1', [admin.id, sha256(forged)]);
    expect((await h.t.http.get(`/v1/orgs/${orgId}/feature-flags`).set(bearer(forged))).status).toBe(200);

    const v = await verifyLedger(h.t, orgId);
    expect(v).toMatchObject({ ok: false, brokenAt: { reason: expect.stringContaining('keyHashDigest') } });
    const [created] = (await h.t.ds.query(`SELECT id FROM runtime_ledger_events WHERE type = 'api_key.created' AND metadata->>'apiKeyId' = $1`, [admin.id])) as { id: string }[];
    expect((v.brokenAt as { eventId?: string } | undefined)?.eventId).toBe(created!.id);
  });

  it('a platform key whose hash was swapped: a break of the platform chain', async () => {
    const created = await h.t.http.post('/v1/api-keys').set(adminAuth).send({ orgId: null, role: 'ops', name: 'platform ops' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const platform = '00000000-0000-0000-0000-000000000000';
    expect(await verifyLedger(h.t, platform)).toMatchObject({ ok: true });
    const [{ key_hash: original }] = (await h.t.ds.query('SELECT key_hash FROM api_keys WHERE id = $1', [created.body.id])) as { key_hash: Buffer }[];
    await h.t.ds.query('UPDATE api_keys SET key_hash = $2 WHERE id = $1', [created.body.id, sha256(forgedKey())]);
    try {
      expect(await verifyLedger(h.t, platform)).toMatchObject({ ok: false, brokenAt: { reason: expect.stringContaining('keyHashDigest') } });
    } finally {
      // The platform chain is every spec's that shares this database: put the key back as it was.
      await h.t.ds.query('UPDATE api_keys SET key_hash = $2 WHERE id = $1', [created.body.id, original]);
    }
    expect(await verifyLedger(h.t, platform)).toMatchObject({ ok: true });
  });

  it("a call whose recorded input was rewritten to another order: verify names the call's request", async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(res.body.status, JSON.stringify(res.body)).toBe('succeeded');
    const id = res.body.toolCallId as string;
    expect(await verifyLedger(h.t, org.orgId)).toMatchObject({ ok: true });

    await h.t.ds.query(`UPDATE tool_calls SET input_redacted = '{"orderId":"99999"}' WHERE id = $1`, [id]);
    const shown = await h.t.http.get(`/v1/tool-calls/${id}`).set(adminAuth);
    expect(shown.body.inputRedacted).toEqual({ orderId: '99999' });
    const v = await verifyLedger(h.t, org.orgId);
    expect(v).toMatchObject({ ok: false, brokenAt: { reason: `tool call ${id}: its input differs from its events'` } });
    const [requested] = (await h.t.ds.query(`SELECT id FROM runtime_ledger_events WHERE type = 'tool_call.requested' AND tool_call_id = $1`, [id])) as { id: string }[];
    expect((v.brokenAt as { eventId?: string } | undefined)?.eventId).toBe(requested!.id);

    // Put back as it was (the same jsonb), the call agrees again.
    await h.t.ds.query(`UPDATE tool_calls SET input_redacted = '{"orderId": "12345"}' WHERE id = $1`, [id]);
    expect(await verifyLedger(h.t, org.orgId)).toMatchObject({ ok: true });
  });
});
