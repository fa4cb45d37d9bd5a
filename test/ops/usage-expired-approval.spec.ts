/**
 * README (approvals): "reads show it expired from the moment it passes". GET /v1/tool-calls (and the export, the
 * detail view, …/result, the run) settle an overdue approval before answering; GET /v1/orgs/:orgId/usage did not:
 * between the expiry and the approvals sweep it counted the call as neither blocked nor anything else, so two ops
 * views of the same instant disagreed. It settles them too now.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Clock } from '../../src/common/clock.js';
import { Sql } from '../../src/db/sql.js';
import { setupOrg, startHarness, type Harness } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { aroundStatements, refundUse } from '../approvals/support.js';

const isSweepExpiry = (text: string): boolean => text.includes('$1::uuid IS NULL') && text.includes('approval_requests');

describe('usage and an approval past its expiry', () => {
  let h: Harness;
  let clock: Clock;
  let advanced = 0;
  let releaseSweep: () => void;
  beforeAll(async () => {
    h = await startHarness({ APPROVAL_TTL_SECONDS: '60' });
    clock = h.t.app.get(Clock);
    // Stand-in for "the sweep has not come round yet" (it runs every 5 s): only the periodic, every-org statement is held.
    releaseSweep = aroundStatements(h.t.app.get(Sql), (text, params, send) => (isSweepExpiry(text) && params[0] === null ? Promise.resolve([]) : send()));
  });
  afterAll(async () => {
    releaseSweep?.();
    clock?.advance(-advanced);
    await h?.close();
  });

  it('counts the expired call as blocked, as GET /v1/tool-calls does at the same moment', async () => {
    const org = await setupOrg(h.t, { tools: ['shopify_refund.create'] });
    const ops = (await createKey(h.t, org.orgId, 'ops')).key;
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(refundUse('3.00'));
    expect(res.status).toBe(202);
    clock.advance(61_000);
    advanced += 61_000;

    const usage = await h.t.http.get(`/v1/orgs/${org.orgId}/usage`).set(bearer(ops));
    // Read first, then the list (which settles the approval): the order matters for what usage saw.
    const listed = await h.t.http.get('/v1/tool-calls').query({ status: 'blocked' }).set(bearer(ops));
    expect(listed.body.items.map((i: { errorCode: string }) => i.errorCode)).toEqual(['APPROVAL_EXPIRED']);
    expect(usage.body.byTool).toEqual([{ toolName: 'shopify_refund', action: 'create', calls: 1, succeeded: 0, failed: 0, blocked: 1, costCents: 0 }]);
  });
});
