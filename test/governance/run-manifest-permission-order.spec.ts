/**
 * A run's manifest is a snapshot of the org's permissions (README: "permission changes apply to runs started after
 * them"). It was read outside the transaction that inserts the run, so a PUT removing a tool could answer 200 between
 * that read and the insert: the run, created after the change by the ledger's order and by the answers', kept the
 * removed tool for its whole life. The read is now made in the run's transaction under the permission lock taken
 * shared (a PUT takes it alone): the PUT waits for the run being created, and a run made after the PUT reads its set.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ToolPermissionsService } from '../../src/permissions/tool-permissions.service.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';

describe('a permissions PUT and a run being created at the same time', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('the PUT waits for the run that read the permissions; a run created after the PUT answered lacks the removed tool', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup', 'shopify_order.add_note'] });
    const perms = h.t.app.get(ToolPermissionsService);
    type Read = typeof perms.allowedToolsForNewRun;
    const original = perms.allowedToolsForNewRun.bind(perms);
    let reached!: () => void;
    const reachedP = new Promise<void>((r) => (reached = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let armed = true;
    // Timing only: the run has read the permissions, then waits (as for a slow statement) until released.
    (perms as unknown as { allowedToolsForNewRun: Read }).allowedToolsForNewRun = async (orgId, specialistId, m) => {
      const tools = await original(orgId, specialistId, m);
      if (armed && orgId === org.orgId) {
        armed = false;
        reached();
        await gate;
      }
      return tools;
    };
    try {
      const creating = h.t.http.post('/v1/runs').set(bearer(org.agentKey)).send({ specialistId: 'support' }).then((r) => r);
      await reachedP;
      let putAnswered = false;
      const putting = h.t.http
        .put(`/v1/orgs/${org.orgId}/tool-permissions`)
        .set(adminAuth)
        .send({ items: [{ toolName: 'order_lookup', action: 'lookup', specialistId: null, enabled: true }] })
        .then((r) => ((putAnswered = true), r));
      await new Promise((r) => setTimeout(r, 500));
      expect(putAnswered, 'the PUT answered while a run that had read the old set was not yet created').toBe(false);
      release();
      const early = await creating;
      const put = await putting;
      expect(early.status).toBe(201);
      expect(put.status).toBe(200);
      // The run made before the change keeps its snapshot, and the ledger has it before the change.
      expect(early.body.manifest.allowedTools).toEqual(['order_lookup.lookup', 'shopify_order.add_note']);
      const order = (await h.t.ds.query(
        `SELECT type FROM runtime_ledger_events WHERE org_id = $1 AND type IN ('run.created', 'tool_permissions.changed') ORDER BY seq`,
        [org.orgId],
      )) as { type: string }[];
      expect(order.map((e) => e.type).slice(-2)).toEqual(['run.created', 'tool_permissions.changed']);

      // A run created after the PUT's 200 holds its set: the removed action is refused there, nothing sent.
      const late = await h.t.http.post('/v1/runs').set(bearer(org.agentKey)).send({ specialistId: 'support' });
      expect(late.body.manifest.allowedTools).toEqual(['order_lookup.lookup']);
      const from = h.emu.requests.length;
      const call = await h.t.http
        .post(`/v1/runs/${late.body.id as string}/tool-calls`)
        .set(bearer(org.agentKey))
        .send(toolUse('shopify_order', { action: 'add_note', orderId: '450789469', note: 'after-permission-removed' }));
      expect({ status: call.body.status, errorCode: call.body.errorCode }).toEqual({ status: 'blocked', errorCode: 'NOT_IN_MANIFEST' });
      expect(h.emu.requests.length).toBe(from);
    } finally {
      (perms as unknown as { allowedToolsForNewRun: unknown }).allowedToolsForNewRun = original;
    }
  });
});
