import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, type Harness, type OrgSetup } from '../support/scenario.js';
import { bearer, createKey } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { approvalFor } from './support.js';

/**
 * The expert approves what GET /v1/approvals/:id shows (input_redacted); the vendor gets the params as sent.
 * A key with a NUL ("amou\u0000nt") used to be recorded without it, as "amount", overwriting the real amount:
 * the expert saw "1" and approved a refund of 5000.
 */
describe('approval view: a NUL in a key never shadows another key', () => {
  let h: Harness;
  let org: OrgSetup;
  let expert: string;
  let ops: string;
  beforeAll(async () => {
    h = await startHarness();
    org = await setupOrg(h.t, { tools: ['nango_proxy.post'], vendors: ['nango'] });
    expert = (await createKey(h.t, org.orgId, 'expert')).key;
    ops = (await createKey(h.t, org.orgId, 'ops')).key;
  });
  afterAll(async () => {
    await h?.close();
  });

  it('the expert sees the amount the vendor gets, and the NUL key beside it as "amou\\uFFFDnt"', async () => {
    // Raw JSON text: after JSON.parse the second key holds a real NUL.
    const text = '{"type":"tool_use","id":"toolu_nulkey1","name":"nango_proxy","input":{"action":"post","path":"/v1/refunds","body":{"amount":"5000","amou\\u0000nt":"1"}}}';
    const res = await h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set({ ...bearer(org.agentKey), 'Content-Type': 'application/json' }).send(text);
    expect(res.status, res.text).toBe(202);
    const toolCallId = res.body.toolCallId as string;
    const pending = await approvalFor(h, expert, toolCallId);

    const view = await h.t.http.get(`/v1/approvals/${pending.id}`).set(bearer(expert));
    expect(view.status).toBe(200);
    expect(view.body.inputRedacted).toEqual({ path: '/v1/refunds', body: { amount: '5000', 'amou\uFFFDnt': '1' } });
    const story = await h.t.http.get(`/v1/tool-calls/${toolCallId}`).set(bearer(ops));
    expect(story.body.inputRedacted).toEqual(view.body.inputRedacted);

    const before = h.emu.requests.length;
    const decided = await h.t.http.post(`/v1/approvals/${pending.id}/decision`).set(bearer(expert)).send({ decision: 'approve', actionDigest: pending.actionDigest });
    expect(decided.status).toBe(200);
    const sent = await waitFor(() => h.emu.requests.slice(before).find((r) => r.vendor === 'nango'), 'the approved call at Nango');
    const vendorBody = JSON.parse(sent.body) as Record<string, unknown>;
    // Under each name the expert saw, the vendor got that value.
    expect(vendorBody.amount).toBe((view.body.inputRedacted as { body: { amount: unknown } }).body.amount);
    expect(vendorBody).toEqual({ amount: '5000', 'amou\u0000nt': '1' });
  });
});
