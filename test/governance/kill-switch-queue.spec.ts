import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitsOnLock } from '../support/lock-waits.js';
import { setupOrg, startHarness, toolUse, type Harness } from '../support/scenario.js';
import { adminAuth, bearer } from '../support/test-app.js';
import { waitFor } from '../support/wait.js';
import { callBeingRecorded } from './governance.helpers.js';

/**
 * A kill switch (tool_calling_enabled → false) or a new block rule sent while the org's calls are being recorded. The
 * intent statement reads the flag and policy rows FOR SHARE, so the change waits for the calls in flight (README "a
 * change waits for calls being recorded"). Row locks alone let a FOR SHARE that comes later pass an UPDATE already
 * waiting: a call posted after the change began waiting was recorded and sent, and the change then answered with an
 * updatedAt before that call's start; calls overlapping back to back held the change off for as long as they came.
 * The intent statement now takes the org's flag and policy advisory locks shared first, which queue behind the
 * change's exclusive one (advisory-locks.ts, "Fair turns"). The call in flight is stood for by callBeingRecorded.
 */
describe('a kill switch or block rule queues in front of later calls', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  const startedAt = async (toolCallId: string): Promise<number> =>
    ((await h.t.ds.query('SELECT started_at FROM tool_calls WHERE id = $1', [toolCallId])) as { started_at: Date }[])[0].started_at.getTime();

  it('a call posted while the kill switch waits is blocked, never sent after the flag’s updatedAt', async () => {
    for (let round = 0; round < 3; round++) {
      const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
      const held = await callBeingRecorded(h.t, org.orgId);
      const off = h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false, reason: 'incident' }).then((r) => r);
      await waitFor(() => waitsOnLock(h.t.ds, '%pg_advisory_xact_lock%'), 'the change waiting for the call in flight');
      const call = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '450789469' })).then((r) => r);
      await new Promise((r) => setTimeout(r, 100));
      await held.done();
      const [put, answer] = await Promise.all([off, call]);
      expect(put.status).toBe(200);
      expect(answer.status, `round ${round}: ${JSON.stringify(answer.body)}`).toBe(403);
      expect(answer.body.errorCode).toBe('FEATURE_DISABLED');
    }
  });

  it('a call posted while a block rule waits is blocked by it, never sent after its updatedAt', async () => {
    for (let round = 0; round < 3; round++) {
      const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'], rules: [] });
      const held = await callBeingRecorded(h.t, org.orgId);
      const block = h.t.http
        .put(`/v1/orgs/${org.orgId}/policies`)
        .set(adminAuth)
        .send({ rules: [{ id: 'incident', match: { toolName: 'order_lookup.*' }, decision: 'block' }] })
        .then((r) => r);
      await waitFor(() => waitsOnLock(h.t.ds, '%pg_advisory_xact_lock%'), 'the change waiting for the call in flight');
      const call = h.t.http.post(`/v1/runs/${org.runId}/tool-calls`).set(bearer(org.agentKey)).send(toolUse('order_lookup', { action: 'lookup', orderId: '450789469' })).then((r) => r);
      await new Promise((r) => setTimeout(r, 100));
      await held.done();
      const [put, answer] = await Promise.all([block, call]);
      expect(put.status).toBe(200);
      if (answer.body.status === 'succeeded') {
        expect(await startedAt(answer.body.toolCallId as string), `round ${round}: sent after the block rule's updatedAt`).toBeLessThanOrEqual(Date.parse(put.body.updatedAt as string));
      }
      expect(answer.body.errorCode, `round ${round}: ${JSON.stringify(answer.body)}`).toBe('POLICY_BLOCKED');
    }
  });

  it('calls that keep overlapping do not hold the kill switch off past the calls in flight when it was sent', async () => {
    const org = await setupOrg(h.t, { tools: ['order_lookup.lookup'] });
    let held = await callBeingRecorded(h.t, org.orgId);
    let answered = 0;
    let firstReleased = 0;
    const off = h.t.http.put(`/v1/orgs/${org.orgId}/feature-flags/tool_calling_enabled`).set(adminAuth).send({ enabled: false }).then((r) => ((answered = performance.now()), r));
    await waitFor(() => waitsOnLock(h.t.ds, '%pg_advisory_xact_lock%'), 'the change waiting for the call in flight');
    // Calls recorded back to back, each overlapping the one before (as a busy agent's do), for up to ~1 s.
    const stream = (async () => {
      for (let i = 0; i < 20 && answered === 0; i++) {
        const next = callBeingRecorded(h.t, org.orgId);
        await new Promise((r) => setTimeout(r, 20));
        await held.done();
        if (i === 0) firstReleased = performance.now();
        held = await next;
        await new Promise((r) => setTimeout(r, 30));
      }
      await held.done();
    })();
    expect((await off).status).toBe(200);
    await stream;
    // The change answers once the call in flight when it was sent is recorded, not when the stream stops.
    expect(answered - firstReleased).toBeLessThan(300);
  });
});
