import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { bearer } from '../support/test-app.js';

/**
 * A runtime posts the model's tool_use block as the Messages API returned it (README step 5). The API's ToolUseBlock
 * carries `caller` ({"type": "direct"}, or the code execution tool under programmatic tool calling; required in the
 * SDKs' response types) and, for a toolset member, `toolset_name`: accepted and ignored, like `cache_control`. They
 * say nothing about what the call does, so a re-post without them replays the call.
 */
describe('a tool_use block exactly as the Messages API returns it', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('single call: a block with caller {"type":"direct"} runs; re-posted without it, or with another caller, it is replayed, not run again', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const plain = toolUse('order_lookup', { action: 'lookup', orderId: '12345' });
    const before = h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ });
    const res = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send({ ...plain, caller: { type: 'direct' } });
    expect([res.status, res.body.status]).toEqual([200, 'succeeded']);
    expect(res.body.toolResult).toMatchObject({ type: 'tool_result', tool_use_id: plain.id, is_error: false });
    const sent = h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ }) - before;
    expect(sent).toBeGreaterThan(0);
    for (const again of [plain, { ...plain, caller: { type: 'code_execution_20250825', tool_id: 'srvtoolu_1' }, toolset_name: 'commerce' }]) {
      const replay = await h.t.http.post(`/v1/runs/${runId}/tool-calls`).set(bearer(agentKey)).send(again);
      expect([replay.status, replay.body.status, replay.body.replayed, replay.body.toolCallId]).toEqual([200, 'succeeded', true, res.body.toolCallId]);
    }
    expect(h.emu.count({ vendor: 'shopify', path: /graphql\.json$/ }) - before).toBe(sent);
  });

  it('batch: every item with caller and toolset_name runs', async () => {
    const { agentKey, runId } = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    const toolUses = ['toolu_caller_a', 'toolu_caller_b'].map((id) => ({
      ...toolUse('order_lookup', { action: 'lookup', orderId: '12345' }, id),
      caller: { type: 'direct' },
      toolset_name: 'commerce',
    }));
    const res = await h.t.http.post(`/v1/runs/${runId}/tool-calls:batch`).set(bearer(agentKey)).send({ toolUses });
    expect(res.status).toBe(200);
    expect((res.body.results as { status: unknown; code?: string }[]).map((r) => [r.status, r.code ?? null])).toEqual([
      ['succeeded', null],
      ['succeeded', null],
    ]);
  });
});
