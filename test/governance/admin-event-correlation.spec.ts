import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LedgerSealerService } from '../../src/ledger/ledger-sealer.service.js';
import { setupOrg, startHarness, toolUse, verifyLedger, type Harness, type OrgSetup } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

interface Event {
  type: string;
  toolCallId: string | null;
  actor: { keyId: string | null; role: string | null; correlationId?: string } | null;
}

/**
 * An admin change on the ledger names the request that made it: its actor carries the request's X-Correlation-Id as
 * echoed (the one the caller sent, or the one the gateway made), so an auditor goes from the event to the request's
 * log line and the caller's own trace. A tool call's events do not repeat it (the call holds its correlation id).
 */
describe('admin events carry the correlation id of the request that caused them', () => {
  let h: Harness;
  let org: OrgSetup;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** The org's events of `type`, newest first (as the listing gives them). */
  const events = async (type: string): Promise<Event[]> => {
    const res = await h.t.http.get('/v1/ledger/events').query({ orgId: org.orgId, type, limit: 200 }).set(adminAuth);
    expect(res.status).toBe(200);
    return res.body.items as Event[];
  };

  it('a flag, a policy and a key changed: each event names its request', async () => {
    const sent: [string, () => Promise<{ status: number }>][] = [
      ['feature_flag.changed', () => h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).set('X-Correlation-Id', 'audit-flag-1').send({ enabled: true, reason: 'launch' })],
      ['policy.changed', () => h.t.http.put(`/v1/orgs/${org.orgId}/policies`).set(adminAuth).set('X-Correlation-Id', 'audit-policy-1').send({ rules: [] })],
      ['api_key.created', () => h.t.http.post('/v1/api-keys').set(adminAuth).set('X-Correlation-Id', 'audit-key-1').send({ orgId: org.orgId, role: 'ops', name: 'audited' })],
    ];
    for (const [type, send] of sent) {
      const res = await send();
      expect(res.status, type).toBeLessThan(300);
      const last = (await events(type))[0]!;
      expect(last.actor, type).toMatchObject({ role: 'admin', correlationId: expect.stringMatching(/^audit-/) });
    }
    expect((await events('feature_flag.changed'))[0]!.actor!.correlationId).toBe('audit-flag-1');
    expect((await events('policy.changed'))[0]!.actor!.correlationId).toBe('audit-policy-1');
    expect((await events('api_key.created'))[0]!.actor!.correlationId).toBe('audit-key-1');
  });

  it('no X-Correlation-Id sent: the event has the one the gateway made and echoed', async () => {
    const res = await h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: true });
    expect(res.status).toBe(200);
    const echoed = res.headers['x-correlation-id'] as string;
    expect(echoed).toMatch(/^[0-9a-f-]{36}$/);
    expect((await events('feature_flag.changed'))[0]!.actor!.correlationId).toBe(echoed);
  });

  it('requests of one key keep their own ids (the cached key is not marked by the first)', async () => {
    for (const id of ['audit-a', 'audit-b']) {
      const res = await h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(bearer(org.adminKey)).set('X-Correlation-Id', id).send({ enabled: true });
      expect(res.status).toBe(200);
    }
    expect((await events('feature_flag.changed')).slice(0, 2).map((e) => e.actor!.correlationId)).toEqual(['audit-b', 'audit-a']);
  });

  it("a tool call's events carry none (the call has its correlation id), and the sealed ledger verifies", async () => {
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).set('X-Correlation-Id', 'agent-call-1').send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(res.status).toBe(200);
    const mine = (await events('tool_call.requested')).filter((e) => e.toolCallId === res.body.toolCallId);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.actor).toEqual({ keyId: expect.any(String), role: 'agent' });
    await h.t.app.get(LedgerSealerService).sealNow();
    expect(await verifyLedger(h.t, org.orgId)).toMatchObject({ ok: true });
  });
});
