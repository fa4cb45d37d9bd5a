import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ToolCallResultsService } from '../../src/tool-calls/tool-call-results.service.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';

/**
 * API.md §1: a revoked key → 401. A long-poll (GET /v1/tool-calls/:id/result?waitMs=…) is authenticated once, when
 * it comes, and then reads the call for up to 30 s: each of those reads checks the key again, so a key revoked
 * meanwhile gets its 401, not the (unredacted) result the call settles with.
 */
describe('a long-poll whose key is revoked while it waits', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('answers 401 at its next read, without the result; a live key\'s long-poll of the same call gets it', async () => {
    const rules = [{ id: 'gate', match: { toolName: 'order_lookup.lookup' }, decision: 'require_expert_approval', reason: 'gate' }];
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], rules });
    const agent = await createKey(h.t, org.orgId, 'agent');
    const expert = await createKey(h.t, org.orgId, 'expert');
    // The key to revoke posts in a run of its own (a run belongs to the agent key that started it); the live long-poll
    // is the org's admin key's, which reads every call of the org.
    const run = await h.t.http.post('/v1/runs').set(bearer(agent.key)).send({ specialistId: 'support' });
    expect(run.status).toBe(201);
    const posted = await h.t.http.post(`/v1/runs/${run.body.id}/tool-calls`).set(bearer(agent.key)).send(toolUse('order_lookup', { action: 'lookup', orderId: '12345' }));
    expect(posted.status).toBe(202);
    const id = posted.body.toolCallId as string;

    const results = h.t.app.get(ToolCallResultsService);
    const revokedPoll = h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=20000`).set(bearer(agent.key)).then((r) => r);
    const livePoll = h.t.http.get(`/v1/tool-calls/${id}/result?waitMs=20000`).set(bearer(org.adminKey)).then((r) => r);
    // Both are authenticated and waiting for the call to settle.
    await waitFor(() => results.waitingOn(id) === 2, 'both long-polls to be waiting');
    expect((await h.t.http.delete(`/v1/api-keys/${agent.id}`).set(adminAuth)).status).toBe(204);
    const approvals = await h.t.http.get('/v1/approvals?status=pending').set(bearer(expert.key));
    const approval = (approvals.body.items as { id: string; toolCallId: string; actionDigest: string }[]).find((a) => a.toolCallId === id)!;
    expect((await h.t.http.post(`/v1/approvals/${approval.id}/decision`).set(bearer(expert.key)).send({ decision: 'approve', actionDigest: approval.actionDigest })).status).toBe(200);

    const [revoked, live] = await Promise.all([revokedPoll, livePoll]);
    expect({ status: revoked.status, code: revoked.body.code, result: revoked.body.result }).toEqual({ status: 401, code: 'UNAUTHENTICATED', result: undefined });
    expect(JSON.stringify(revoked.body)).not.toContain('12345');
    expect({ status: live.status, call: live.body.status, orderId: live.body.result?.orderId }).toEqual({ status: 200, call: 'succeeded', orderId: '12345' });
  }, 40_000);
});
