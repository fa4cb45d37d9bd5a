import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { approvalFor, refundUse } from './support.js';

interface Doc {
  components: { schemas: Record<string, { properties: Record<string, { nullable?: boolean }> }> };
}

/**
 * Optional fields that took `null` (class-validator's @IsOptional lets it through) though /openapi.json did not say
 * so, and the null became something else: an approval decision's `reason: null` was stored and shown as the text
 * "null" (and its digest put on the ledger as a reason given). Each now says `nullable: true`, and a null is taken as
 * absent, as CreateOrgDto.id and SetFeatureFlagDto.reason already were.
 */
describe('optional fields sent as null are taken as absent, as the OpenAPI document says', () => {
  let h: Harness;
  let org: OrgSetup;
  let expert: string;
  let doc: Doc;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    expert = (await createKey(h.t, org.orgId, 'expert')).key;
    doc = (await h.t.http.get('/openapi.json')).body as Doc;
  }, 90_000);
  afterAll(async () => {
    await h?.close();
  });

  it('documents each as nullable', () => {
    const s = doc.components.schemas;
    expect([s.CreateRunDto!.properties.conversationId?.nullable, s.CreateRunDto!.properties.metadata?.nullable, s.EndRunDto!.properties.reason?.nullable, s.DecideApprovalDto!.properties.reason?.nullable]).toEqual([
      true,
      true,
      true,
      true,
    ]);
  });

  it('an approval decided with reason null has no reason, on the approval and on the ledger', async () => {
    const call = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('150.00'));
    expect(call.status).toBe(202);
    const a = await approvalFor(h, expert, call.body.toolCallId as string);
    const res = await h.t.http.post(`/v1/approvals/${a.id}/decision`).set(bearer(expert)).send({ decision: 'reject', actionDigest: a.actionDigest, reason: null });
    expect(res.status).toBe(200);
    expect(res.body.decisionReason).toBeNull();
    expect((await h.t.http.get(`/v1/approvals/${a.id}`).set(bearer(expert))).body.decisionReason).toBeNull();
    const events = (await h.t.http.get('/v1/ledger/events').set(bearer(org.adminKey)).query({ runId: org.runId, type: 'tool_call.blocked' })).body.items as {
      metadata: Record<string, unknown>;
    }[];
    expect(events).toHaveLength(1);
    expect(events[0]!.metadata).toHaveProperty('reasonDigest', null);
    expect((await h.t.http.get('/v1/ledger/verify').set(bearer(org.adminKey))).body.ok).toBe(true);
  });

  it('a run created with conversationId and metadata null, and ended with reason null, reads as one sent without them', async () => {
    const agent = bearer(org.agentKey);
    const nulls = await h.t.http.post('/v1/runs').set(agent).send({ specialistId: 'support', conversationId: null, metadata: null });
    const absent = await h.t.http.post('/v1/runs').set(agent).send({ specialistId: 'support' });
    expect([nulls.status, absent.status]).toEqual([201, 201]);
    const shape = (r: Record<string, unknown>) => ({ conversationId: r.conversationId, metadata: r.metadata });
    expect(shape(nulls.body as Record<string, unknown>)).toEqual(shape(absent.body as Record<string, unknown>));
    for (const verb of ['cancel', 'complete']) {
      const run = (await h.t.http.post('/v1/runs').set(agent).send({ specialistId: 'support' })).body.id as string;
      const ended = await h.t.http.post(`/v1/runs/${run}/${verb}`).set(agent).send({ reason: null });
      expect([verb, ended.status, ended.body.ended?.reason]).toEqual([verb, 200, null]);
    }
    expect((await h.t.http.get('/v1/ledger/verify').set(bearer(org.adminKey))).body.ok).toBe(true);
  });
});
