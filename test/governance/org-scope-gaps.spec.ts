/**
 * Org-scope checks that no other test exercised (found by hand-made mutation testing).
 * Each case passes on the real source and fails with the named mutation applied.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';

describe('org scope of listings, flags and key revocation (each check was removable unnoticed)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '3600' });
  });
  afterAll(async () => {
    await h?.close();
  });

  // Fails if src/auth/api-keys.service.ts revoke(): `if (!row || (actor.orgId !== null && row.orgId !== actor.orgId))` → `if (!row)`.
  it('an org admin key cannot revoke another org’s API key: 404, and the key keeps working', async () => {
    const a = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const b = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const bAgent = await createKey(h.t, b.orgId, 'agent');
    const res = await h.t.http.delete(`/v1/api-keys/${bAgent.id}`).set(bearer(a.adminKey));
    expect(res.status, JSON.stringify(res.body)).toBe(404);
    const [row] = (await h.t.ds.query('SELECT revoked_at FROM api_keys WHERE id = $1', [bAgent.id])) as { revoked_at: Date | null }[];
    expect(row.revoked_at).toBeNull();
    expect((await h.t.http.post('/v1/runs').set(bearer(bAgent.key)).send({ specialistId: 'support' })).status).toBe(201);
  });

  // Fails if src/approvals/approvals.service.ts list(): drop `if (orgId !== null) query.where((x) => `org_id = ${x}::uuid`, orgId);`
  it('GET /v1/approvals with an org key lists its own org’s approvals only', async () => {
    const rules = [{ id: 'client-notes', match: { toolName: 'shopify_order.add_note' }, decision: 'require_client_approval' }];
    const a = await setupOrg(h.t, { tools: ['shopify_order.add_note'], rules });
    const b = await setupOrg(h.t, { tools: ['shopify_order.add_note'], rules });
    const posted = await h.t.http.post(`/v1/runs/${b.runId}/tool-calls`).set(bearer(b.agentKey)).send(toolUse('shopify_order', { action: 'add_note', orderId: '12345', note: 'hi' }));
    expect(posted.status, JSON.stringify(posted.body)).toBe(202);
    for (const key of [a.adminKey, (await createKey(h.t, a.orgId, 'ops')).key, (await createKey(h.t, a.orgId, 'expert')).key]) {
      const res = await h.t.http.get('/v1/approvals?limit=200').set(bearer(key));
      expect(res.status).toBe(200);
      const items = res.body.items as { toolCallId: string; runId: string }[];
      expect(items.find((i) => i.toolCallId === posted.body.toolCallId)).toBeUndefined();
      expect(items.every((i) => i.runId === a.runId)).toBe(true);
    }
    // The platform key naming org B still sees it (the scope works, not an empty listing).
    const platform = await h.t.http.get(`/v1/approvals?orgId=${b.orgId}`).set(adminAuth);
    expect((platform.body.items as { toolCallId: string }[]).map((i) => i.toolCallId)).toContain(posted.body.toolCallId);
  });

  // Fails if src/orgs/orgs.controller.ts listFlags(): drop `await this.scope.assertAccess(p, orgId);`
  it('GET /v1/orgs/:orgId/feature-flags of another org, or of no org, is 404 for an org key', async () => {
    const a = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const b = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const ops = await createKey(h.t, a.orgId, 'ops');
    for (const key of [a.adminKey, ops.key]) {
      expect((await h.t.http.get(`/v1/orgs/${a.orgId}/feature-flags`).set(bearer(key))).status).toBe(200);
      const other = await h.t.http.get(`/v1/orgs/${b.orgId}/feature-flags`).set(bearer(key));
      expect(other.status, JSON.stringify(other.body)).toBe(404);
      expect(other.body.code).toBe('NOT_FOUND');
    }
    expect((await h.t.http.get('/v1/orgs/00000000-0000-4000-8000-00000000abcd/feature-flags').set(adminAuth)).status).toBe(404);
  });

  // Fails if src/approvals/approvals.service.ts list(): `const kind = p.role === 'agent' ? 'client' : q.kind;` → `const kind = q.kind;`
  it('an agent key’s approvals listing (no kind filter) leaves out the expert approvals of its own run', async () => {
    const a = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const refund = await h.t.http.post(`/v1/runs/${a.runId}/tool-calls`).set(bearer(a.agentKey)).send(toolUse('shopify_refund', { action: 'create', orderId: '12345', amount: '1.00' }));
    expect(refund.status, JSON.stringify(refund.body)).toBe(202); // high risk → expert approval
    const expert = await createKey(h.t, a.orgId, 'expert');
    const seen = await h.t.http.get('/v1/approvals').set(bearer(expert.key));
    expect((seen.body.items as { toolCallId: string; kind: string }[]).find((i) => i.toolCallId === refund.body.toolCallId)?.kind).toBe('expert');
    const res = await h.t.http.get('/v1/approvals').set(bearer(a.agentKey));
    expect(res.status).toBe(200);
    expect((res.body.items as { kind: string }[]).filter((i) => i.kind !== 'client')).toEqual([]);
  });
});
