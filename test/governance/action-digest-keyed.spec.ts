import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { actionDigest, unkeyedActionDigest } from '../../src/common/canonical-json.js';
import { Sql } from '../../src/db/sql.js';
import { aroundStatements, waitingRefund } from '../approvals/support.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';

type Shown = { id: string; toolName: string; action: string; actionDigest: string; inputRedacted: Record<string, unknown> };

/**
 * The action digest is shown beside the redacted input (GET /v1/tool-calls/:id, the approval view, ledger events): a
 * plain SHA-256 of {toolName, action, params} confirmed offline guesses of a redacted PIN or SSN. It is now an
 * HMAC-SHA256 under a per-org random key (orgs.digest_key); calls recorded before keep their unkeyed digests, and a
 * resend of one is still the same call.
 */
describe('the action digest is keyed per org, and calls recorded under the unkeyed digest still replay', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({});
  });
  afterAll(async () => {
    await h?.close();
  });

  const digestKey = async (orgId: string): Promise<Buffer> =>
    ((await h.t.ds.query('SELECT digest_key FROM orgs WHERE id = $1', [orgId])) as { digest_key: Buffer }[])[0].digest_key;
  const post = (org: { runId: string; agentKey: string }, use: object, headers: Record<string, string> = {}) =>
    h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).set(headers).send(use);
  const shown = async (key: string, id: string): Promise<Shown> => (await h.t.http.get(`/v1/tool-calls/${id}`).set(bearer(key))).body as Shown;
  const pinCall = (pin: string, id?: string) => toolUse('nango_proxy', { action: 'post', path: '/v1/customers', body: { customerId: 'c_981', pin } }, id);

  it('each org has its own 32 random bytes; the same call in two orgs gets two digests, each the HMAC under its org key', async () => {
    const [a, b] = await Promise.all([1, 2].map(() => setupOrg(h.t, { tools: ['nango_proxy.post'], vendors: ['nango'] })));
    const [keyA, keyB] = [await digestKey(a.orgId), await digestKey(b.orgId)];
    expect(keyA.length).toBe(32);
    expect(keyB.length).toBe(32);
    expect(keyA.equals(keyB)).toBe(false);
    const [ra, rb] = [await post(a, pinCall('4821')), await post(b, pinCall('4821'))];
    const [opsA, opsB] = [await createKey(h.t, a.orgId, 'ops'), await createKey(h.t, b.orgId, 'ops')];
    const [da, db] = [(await shown(opsA.key, ra.body.toolCallId)).actionDigest, (await shown(opsB.key, rb.body.toolCallId)).actionDigest];
    expect(da).toMatch(/^[0-9a-f]{64}$/);
    expect(da).not.toBe(db);
    const identity = { toolName: 'nango_proxy', action: 'post', params: { path: '/v1/customers', body: { customerId: 'c_981', pin: '4821' } } };
    expect(da).toBe(actionDigest(identity, keyA));
    expect(db).toBe(actionDigest(identity, keyB));
  });

  it('the digest an ops key sees beside a redacted PIN confirms no guess of it (the unkeyed oracle attack fails)', async () => {
    const org = await setupOrg(h.t, { tools: ['nango_proxy.post'], vendors: ['nango'] });
    const ops = await createKey(h.t, org.orgId, 'ops');
    const res = await post(org, pinCall('4821'));
    const row = await shown(ops.key, res.body.toolCallId);
    expect((row.inputRedacted.body as Record<string, unknown>).pin).toBe('[REDACTED]');
    let recovered: string | null = null;
    for (let i = 0; i < 10_000 && recovered === null; i++) {
      const guess = String(i).padStart(4, '0');
      const params = structuredClone(row.inputRedacted);
      (params.body as Record<string, unknown>).pin = guess;
      if (unkeyedActionDigest({ toolName: row.toolName, action: row.action, params }) === row.actionDigest) recovered = guess;
    }
    expect(recovered).toBeNull();
  });

  it('a resend (same tool_use id, or same Idempotency-Key) replays the call; the org key is read once, not per call', async () => {
    const org = await setupOrg(h.t, { tools: ['nango_proxy.post'], vendors: ['nango'] });
    let keyReads = 0;
    const undo = aroundStatements(h.t.app.get(Sql), async (text, _params, send) => {
      if (text.includes('digest_key')) keyReads++;
      return send();
    });
    try {
      const use = pinCall('1234');
      const first = await post(org, use, { 'Idempotency-Key': `dig-${org.runId}` });
      // A write through the proxy waits for an expert (202); its resend is its replay.
      expect(first.status, JSON.stringify(first.body)).toBe(202);
      const again = await post(org, use, { 'Idempotency-Key': `dig-${org.runId}` });
      expect([again.status, again.body.toolCallId, again.body.replayed]).toEqual([202, first.body.toolCallId, true]);
      const byId = await post(org, use);
      expect([byId.status, byId.body.toolCallId, byId.body.replayed]).toEqual([202, first.body.toolCallId, true]);
      // Another action under the same tool_use id is still refused.
      const other = await post(org, pinCall('9999', use.id));
      expect([other.status, other.body.code]).toEqual([422, 'IDEMPOTENCY_KEY_REUSED']);
      await post(org, pinCall('5555'));
      expect(keyReads).toBe(1); // this org's first call read it; every later one had it in memory
    } finally {
      undo();
    }
  });

  it('a call recorded before the upgrade (its unkeyed digest stored) is replayed on resend, not 422 IDEMPOTENCY_KEY_REUSED', async () => {
    const org = await setupOrg(h.t, { tools: ['nango_proxy.post'], vendors: ['nango'] });
    const use = pinCall('2468');
    const first = await post(org, use, { 'Idempotency-Key': `legacy-${org.runId}` });
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    const legacy = unkeyedActionDigest({ toolName: 'nango_proxy', action: 'post', params: { path: '/v1/customers', body: { customerId: 'c_981', pin: '2468' } } });
    await h.t.ds.query('UPDATE tool_calls SET action_digest = $2 WHERE id = $1', [first.body.toolCallId, legacy]);
    const sent = h.emu.count({ vendor: 'nango' });
    const byKey = await post(org, use, { 'Idempotency-Key': `legacy-${org.runId}` });
    expect([byKey.status, byKey.body.toolCallId, byKey.body.replayed]).toEqual([202, first.body.toolCallId, true]);
    const byToolUse = await post(org, use);
    expect([byToolUse.status, byToolUse.body.toolCallId, byToolUse.body.replayed]).toEqual([202, first.body.toolCallId, true]);
    expect(h.emu.count({ vendor: 'nango' })).toBe(sent);
    // The legacy form is no wildcard: another action under the same tool_use id is still refused.
    const other = await post(org, pinCall('1357', use.id));
    expect([other.status, other.body.code]).toEqual([422, 'IDEMPOTENCY_KEY_REUSED']);
  });

  it('an executed call recorded before the upgrade is replayed with its result on resend, the vendor not called again', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const use = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const first = await post(org, use);
    expect([first.status, first.body.status], JSON.stringify(first.body)).toEqual([200, 'succeeded']);
    const legacy = unkeyedActionDigest({ toolName: 'order_lookup', action: 'lookup', params: { orderId: '12345' } });
    const [row] = (await h.t.ds.query('SELECT action_digest FROM tool_calls WHERE id = $1', [first.body.toolCallId])) as { action_digest: string }[];
    expect(row.action_digest).not.toBe(legacy);
    await h.t.ds.query('UPDATE tool_calls SET action_digest = $2 WHERE id = $1', [first.body.toolCallId, legacy]);
    const sent = h.emu.requests.length;
    const again = await post(org, use);
    expect([again.status, again.body.toolCallId, again.body.replayed, again.body.result]).toEqual([200, first.body.toolCallId, true, first.body.result]);
    expect(h.emu.requests.length).toBe(sent);
  });

  it('an approval pending from before the upgrade (unkeyed digest) is approved with the digest the expert was shown', async () => {
    const { expert, toolCallId, approval } = await waitingRefund(h, '3.00');
    const legacy = unkeyedActionDigest({ toolName: 'shopify_refund', action: 'create', params: { orderId: '12345', amount: '3.00' } });
    expect(approval.actionDigest).not.toBe(legacy);
    await h.t.ds.query('UPDATE tool_calls SET action_digest = $2 WHERE id = $1', [toolCallId, legacy]);
    await h.t.ds.query('UPDATE approval_requests SET action_digest = $2 WHERE id = $1', [approval.id, legacy]);
    const listed = ((await h.t.http.get('/v1/approvals?status=pending').set(bearer(expert.key))).body.items as { id: string; actionDigest: string }[]).find((a) => a.id === approval.id)!;
    expect(listed.actionDigest).toBe(legacy);
    const decided = await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: listed.actionDigest });
    expect(decided.status, JSON.stringify(decided.body)).toBe(200);
  });
});
